//! `storage`: file I/O through an encryption layer, so a study can set the throughput of clear
//! and encrypted storage beside the CPU it costs. One transaction is one I/O of `block_bytes`
//! (a read or a write of whole 4096-byte sectors) on one data file, at a load level
//! (`closed:N`: N threads, each issuing its next I/O when the last ended; `open:R[/T]`: R I/Os
//! per second, timed from when each was due).
//!
//! **Schemes** (`scheme`): `clear` (no encryption, the control; every backend), and per 4096-byte
//! sector, through the measured backend:
//!
//! - `aes-128-xts`, `aes-256-xts`: XTS-AES with the sector number as a 16-byte little-endian
//!   tweak (dm-crypt's `aes-xts-plain64`, the LUKS2 default), keys of 32 / 64 bytes
//!   (`Backend::xts`); encrypted in place, the file holds exactly the ciphertext sectors;
//! - `aes-256-gcm`: AES-256-GCM per sector (`Backend::aead`), a fresh 12-byte nonce per write
//!   (the writing thread's 4-byte id ‖ its 8-byte counter, big-endian; the untimed preparation
//!   uses id `ffffffff`), AAD = the sector number (8 bytes, little-endian) so a sector cannot be
//!   moved. The nonce and the 16-byte tag are stored *beside* the data in a side file
//!   `<data file>.tags`, 32 bytes per sector (nonce 12 ‖ tag 16 ‖ 4 zero bytes), read and written
//!   through the page cache even when the data file uses O_DIRECT, so the data file stays
//!   sector-aligned: detached integrity metadata, as dm-integrity keeps it. (File-level tools
//!   such as gocryptfs interleave each block's nonce and tag with its data instead, which moves
//!   every block off the sector grid.) The `Aead` trait takes ciphertext ‖ tag in one slice and
//!   returns plaintext in a `Vec`, so each sector is copied once in and once out beside the GCM
//!   itself; a failed authentication fails the I/O, and so the result (`invalid`).
//!
//! **The file**: one per request in `dir` (`storage-<pid>-<n>.data`, and `.data.tags` for GCM),
//! written in full through the layer before anything is timed — each sector's plaintext a
//! deterministic pattern derived from its number — and `fdatasync`'d. Thread i of N owns blocks
//! [i·B/N, (i+1)·B/N) of the B blocks of the file (`file_bytes` ≥ N × `block_bytes`, so every
//! region has one); `sequential` walks its region and wraps, `random` picks uniformly among its
//! region's blocks (a splitmix64 generator per thread, seeded from the thread's index, so runs
//! repeat). `direction`: `read`, `write`, or `mixed:N` (each I/O a read with probability N %).
//! A read is one `pread` of the block (GCM: and one of its sectors' 32-byte tag slots) and
//! then each sector decrypted (GCM: verified) into the thread's buffer; a write encrypts each
//! sector of the thread's plaintext block into the I/O buffer (GCM: sealed, tags kept) and is
//! one `pwrite` (GCM: and one of the tag slots), overwriting in place. `direct = true` opens the
//! data file with O_DIRECT (buffers 4096-aligned). `fsync`: `each` = an `fdatasync` of the data
//! (and tags) file after every write, inside the timed I/O; `end` = one `fdatasync` after the
//! window, its time added to `wall_ns` and reported as `fsync_end_ns` (and its CPU to the process
//! CPU); `none` = neither.
//!
//! **Cache**: `cold` (default): after the warm-up and before the window (`run_load_with`'s step
//! between the two), the data and tags files are `fdatasync`'d and dropped from the page cache
//! (`posix_fadvise(POSIX_FADV_DONTNEED)`), so the window starts with none of the file's pages
//! cached. `cached` (reads only) models a page cache *above* the encryption layer, where
//! dm-crypt's sits: before the warm-up the whole file is read once through the layer
//! (decrypting, and checked against the pattern written), untimed, into a memfd (shmem: kernel
//! page cache pages), and the timed reads are `pread`s from that memfd — the same path for every
//! scheme, `clear` included. A cached read does no crypto, as on dm-crypt: that is why cached
//! reads of clear and encrypted volumes come out identical.
//!
//! **CPU**: `cpu_ns` is each I/O thread's CPU (its user and system time); the result's
//! `storage.process_user_ns` / `process_system_ns` are the whole process's over the window
//! (`getrusage`, read by the coordinating thread at the window's start and end): the kernel's
//! work for the I/O lands in system time, so it matters here. `client_timeline` is the process's
//! CPU over time. Kernel work done outside the process (block-layer completions in interrupts,
//! writeback threads; dm-crypt's own kcryptd workers) is not in it.
//!
//! **Correct before timed**: before any timing, (1) the backend's known-answer test of the scheme
//! (`kat::xts_known_answer`, IEEE Std 1619-2007 Annex B, at the key size; for GCM the
//! AES-256-GCM seal and open known answers of `kat::validate_against`); (2) after preparing the
//! file, sector 0 and the last sector are read raw from the file, below the layer: for an
//! encrypted scheme each must differ from its plaintext and decrypt back to it with a
//! *different* library using the same key and tweak (GCM: nonce, tag and AAD) — RustCrypto
//! (xts-mode, aes-gcm), or OpenSSL when the measured backend is RustCrypto — and a GCM sector
//! with one ciphertext bit flipped must fail to authenticate with the measured backend; for
//! `clear` they must equal the plaintext. The other library is called directly, also in the
//! FIPS build (there it is only refused for *measuring*). Keys come from the OS random generator
//! per request, stay in memory (zeroed when dropped) and are never written anywhere. Any check
//! failing: `invalid` with the reason, nothing timed; the outcome is in `validation` (`kat`,
//! `kat_source`, `on_disk`, `cross_decrypt` naming the library that decrypted, and the usual
//! `cross_checks`).
//!
//! **`layer = dm-crypt`**: the same I/O on a real LUKS2 volume (aes-xts-plain64, 4096-byte
//! sectors, the key size from the scheme; `clear` = the loop device alone) over a loop device
//! backed by a file in `dir`, on the block device directly (no file system), closed and detached
//! afterwards even on error. The kernel encrypts; the volume key is generated here and handed to
//! cryptsetup through a memfd (never on disk), so the raw sectors can be decrypted by RustCrypto
//! as above. Where the host does not allow it (not root, no device-mapper, no cryptsetup or
//! losetup, no dm_crypt module) the answer is `unsupported` with one line saying why
//! ([`dm_crypt_unavailable`]); `aes-256-gcm` on dm-crypt (it needs dm-integrity) is unsupported.
//! This path cannot run on the machine this was written on (no device-mapper): it is kept simple
//! and has not been exercised.
//!
//! **Files**: everything created in `dir` is removed when the request ends, on every path (a
//! guard's `Drop`); the orchestrator removes the directory itself afterwards too (after a kill).

use super::{choice, measured_fields, number, text, Finish, WorkloadCase};
use crate::backends::{self, failed, Aead, Backend, BackendError, SectorCipher, XtsBits};
use crate::kat::{self, CrossCheck};
use crate::measure::load::{run_load_with, TxnFn};
use crate::measure::{clock, sampler};
use crate::ops::{AeadAlg, Op, Params, RawParams};
use serde_json::{json, Map, Value};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
const CHUNK: usize = 1 << 20;
/// LUKS2 data offset used on dm-crypt, in bytes (`--offset` 32768 × 512).
const LUKS_DATA_OFFSET: u64 = 16 << 20;

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
    fn key_len(self) -> usize {
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

const SCHEMES: [&str; 4] = ["clear", "aes-128-xts", "aes-256-xts", "aes-256-gcm"];
const BOOLS: [&str; 2] = ["false", "true"];
/// The enumerated parameters: each value's name, the default first (as in [`defaults`]).
const PATTERNS: [(&str, Pattern); 2] = [("sequential", Pattern::Sequential), ("random", Pattern::Random)];
const FSYNCS: [(&str, Fsync); 3] = [("none", Fsync::None), ("end", Fsync::End), ("each", Fsync::Each)];
const CACHES: [(&str, Cache); 2] = [("cold", Cache::Cold), ("cached", Cache::Cached)];
const LAYERS: [(&str, Layer); 2] = [("userspace", Layer::Userspace), ("dm-crypt", Layer::DmCrypt)];

/// The names of an enumerated parameter's values, in order.
fn names<T>(table: &[(&'static str, T)]) -> Vec<&'static str> {
    table.iter().map(|(n, _)| *n).collect()
}

/// The name of `value` in `table` ("?" if absent, which the tables rule out).
fn name_of<T: PartialEq>(table: &[(&'static str, T)], value: T) -> &'static str {
    table.iter().find(|(_, v)| *v == value).map_or("?", |(n, _)| *n)
}

/// One enumerated parameter from `params` (default: the table's first value); errors name the
/// values it takes.
fn enumerated<T: Copy>(params: &Map<String, Value>, key: &str, table: &[(&'static str, T)]) -> Result<T, String> {
    let given = text(params, key, table[0].0)?;
    choice(key, &given, |s| table.iter().find(|(n, _)| *n == s).map(|(_, v)| *v), &names(table))
}

/// The values a parameter takes when not given (`dir` has none: it is required).
pub fn defaults() -> Map<String, Value> {
    let v = json!({"scheme": "clear", "pattern": "sequential", "direction": "read", "block_bytes": DEFAULT_BLOCK,
                   "file_bytes": DEFAULT_FILE, "direct": "false", "fsync": "none", "cache": "cold",
                   "layer": "userspace", "load": "closed:1"});
    v.as_object().cloned().unwrap_or_default()
}

/// The enumerated parameters' values, for `hello`'s `param_values` (`direction` is not listed:
/// `mixed:N` is a form, not a list).
pub fn param_values(m: &mut Map<String, Value>) {
    m.insert("scheme".into(), SCHEMES.to_vec().into());
    m.insert("pattern".into(), names(&PATTERNS).into());
    m.insert("direct".into(), BOOLS.to_vec().into());
    m.insert("fsync".into(), names(&FSYNCS).into());
    m.insert("cache".into(), names(&CACHES).into());
    m.insert("layer".into(), names(&LAYERS).into());
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

/// Check a request's own parameters (the load level is checked by `workloads::parse`, and
/// against the file by [`check_threads`]). `dir`, when given, must be an existing, writable
/// directory (checked without writing); a request to run needs one ([`ready_to_run`]).
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
fn check_dir(d: &str) -> Result<PathBuf, String> {
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

/// What a request to *run* needs beyond [`parse`]: a `dir`.
pub fn ready_to_run(spec: &Spec) -> Result<(), String> {
    match spec.dir {
        Some(_) => Ok(()),
        None => Err("dir is required: the directory to create the data file in (the orchestrator passes a private one per repetition)".into()),
    }
}

/// Whether `backend` (and this host) can run `spec` at all, writing nothing: `Err(reason)` when
/// the layer is unavailable here or the backend lacks the scheme.
pub fn check(spec: &Spec, backend: &dyn Backend) -> Result<(), String> {
    if spec.layer == Layer::DmCrypt {
        if let Some(why) = dm_crypt_unavailable() {
            return Err(why);
        }
        if spec.scheme == Scheme::Aes256Gcm {
            return Err(DM_GCM.into());
        }
        return Ok(());
    }
    let key = probe_key(spec.scheme.key_len());
    match Crypt::new(backend, spec.scheme, &key, 0) {
        Err(BackendError::Unsupported(why)) => Err(why),
        _ => Ok(()),
    }
}

const DM_GCM: &str = "aes-256-gcm on the dm-crypt layer needs dm-integrity (cryptsetup --integrity aead), which this workload does not set up: dm-crypt runs clear and the XTS schemes";

/// A fixed key with unequal halves, for `check` only.
fn probe_key(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

// ---- the sector layer ------------------------------------------------------------------------

/// A key from the OS random generator, zeroed when dropped; never written anywhere.
struct Key(Vec<u8>);

impl Key {
    /// `len` random bytes; for XTS, halves that differ.
    fn random(len: usize) -> Result<Key, String> {
        use rand_core::RngCore;
        let mut k = Key(vec![0u8; len]);
        loop {
            rand_core::OsRng.try_fill_bytes(&mut k.0).map_err(|e| format!("the OS random generator failed: {e}"))?;
            let (a, b) = k.0.split_at(len / 2);
            if len == 0 || a != b {
                return Ok(k);
            }
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        for b in self.0.iter_mut() {
            // SAFETY: a valid, aligned byte of our own buffer; volatile so the zeroing stays.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

/// One thread's encryption layer: nothing, an XTS cipher, or an AEAD with its nonce counter.
enum Crypt {
    Clear,
    Xts(Box<dyn SectorCipher>),
    Gcm {
        aead: Box<dyn Aead>,
        /// The writer's id (first 4 bytes of every nonce it makes).
        id: u32,
        /// Sectors sealed so far by this writer (last 8 bytes of the nonce).
        counter: u64,
        sealed: Vec<u8>,
        opened: Vec<u8>,
    },
}

impl Crypt {
    /// The layer of `scheme` on `backend` with `key`; `id` names the writer in GCM nonces.
    fn new(backend: &dyn Backend, scheme: Scheme, key: &[u8], id: u32) -> Result<Crypt, BackendError> {
        Ok(match scheme {
            Scheme::Clear => Crypt::Clear,
            Scheme::Aes256Gcm => Crypt::Gcm {
                aead: backend.aead(AeadAlg::Aes256Gcm, key)?,
                id,
                counter: 0,
                sealed: Vec::with_capacity(SECTOR + AeadAlg::TAG_LEN),
                opened: Vec::with_capacity(SECTOR + AeadAlg::TAG_LEN),
            },
            x => Crypt::Xts(backend.xts(x.xts().expect("an XTS scheme"), key)?),
        })
    }

    /// Encrypt the sectors of `buf` (plaintext in, ciphertext out, in place), the first being
    /// sector `first`; GCM writes each sector's nonce and tag into its slot of `tags`.
    fn encrypt(&mut self, first: u64, buf: &mut [u8], tags: &mut [u8]) -> Result<(), BackendError> {
        match self {
            Crypt::Clear => Ok(()),
            Crypt::Xts(x) => {
                for (k, s) in buf.chunks_exact_mut(SECTOR).enumerate() {
                    x.encrypt_sector(first + k as u64, s)?;
                }
                Ok(())
            }
            Crypt::Gcm { aead, id, counter, sealed, .. } => {
                for (k, (s, slot)) in buf.chunks_exact_mut(SECTOR).zip(tags.chunks_exact_mut(TAG_SLOT)).enumerate() {
                    let mut nonce = [0u8; 12];
                    nonce[..4].copy_from_slice(&id.to_be_bytes());
                    nonce[4..].copy_from_slice(&counter.to_be_bytes());
                    *counter += 1;
                    let aad = (first + k as u64).to_le_bytes();
                    aead.seal(&nonce, &aad, s, sealed)?;
                    if sealed.len() != SECTOR + AeadAlg::TAG_LEN {
                        return Err(BackendError::Failed(format!("sealing a sector gave {} bytes", sealed.len())));
                    }
                    s.copy_from_slice(&sealed[..SECTOR]);
                    slot[..12].copy_from_slice(&nonce);
                    slot[12..28].copy_from_slice(&sealed[SECTOR..]);
                    slot[28..].fill(0);
                }
                Ok(())
            }
        }
    }

    /// Decrypt (GCM: and verify) the sectors of `buf` in place, the first being sector `first`,
    /// with their slots in `tags` (GCM). Errors: `Failed` when a sector does not authenticate.
    fn decrypt(&mut self, first: u64, buf: &mut [u8], tags: &[u8]) -> Result<(), BackendError> {
        match self {
            Crypt::Clear => Ok(()),
            Crypt::Xts(x) => {
                for (k, s) in buf.chunks_exact_mut(SECTOR).enumerate() {
                    x.decrypt_sector(first + k as u64, s)?;
                }
                Ok(())
            }
            Crypt::Gcm { aead, sealed, opened, .. } => {
                for (k, (s, slot)) in buf.chunks_exact_mut(SECTOR).zip(tags.chunks_exact(TAG_SLOT)).enumerate() {
                    let sector = first + k as u64;
                    let nonce: [u8; 12] = slot[..12].try_into().expect("12 bytes");
                    sealed.clear();
                    sealed.extend_from_slice(s);
                    sealed.extend_from_slice(&slot[12..28]);
                    aead.open(&nonce, &sector.to_le_bytes(), sealed, opened)
                        .map_err(|e| BackendError::Failed(format!("sector {sector}: AES-256-GCM: {e}")))?;
                    if opened.len() != SECTOR {
                        return Err(BackendError::Failed(format!("sector {sector}: opened {} bytes", opened.len())));
                    }
                    s.copy_from_slice(opened);
                }
                Ok(())
            }
        }
    }
}

/// The plaintext of sector `sector`: a splitmix64 stream seeded from the sector number, so every
/// sector differs and none is trivial.
fn fill_plaintext(sector: u64, out: &mut [u8]) {
    let mut rng = Prng(sector ^ 0x5354_4f52_4147_4521);
    for w in out.chunks_exact_mut(8) {
        w.copy_from_slice(&rng.next().to_le_bytes());
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): small, fast, enough for choosing blocks.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (multiply-shift; the bias is below 2^-40 for the sizes here).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// A zeroed buffer aligned to a sector, as O_DIRECT needs.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is plain owned memory; only its owner touches it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), SECTOR).expect("a valid layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised (zeroed, then written) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len.max(1), SECTOR).expect("a valid layout");
        // SAFETY: allocated in `new` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

// ---- files -----------------------------------------------------------------------------------

/// The files a request created, removed when it is dropped (every return path).
#[derive(Default)]
struct Scratch(Vec<PathBuf>);

impl Scratch {
    /// Create `path` (it must not exist), owner-only, and remember it for removal.
    fn create(&mut self, path: PathBuf) -> Result<File, String> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        self.0.push(path);
        Ok(f)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for p in &self.0 {
            if let Err(e) = std::fs::remove_file(p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("cryptoperf-worker: storage: removing {}: {e}", p.display());
                }
            }
        }
    }
}

/// A fresh name for this request's data file in `dir`.
fn data_path(dir: &Path) -> PathBuf {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    dir.join(format!("storage-{}-{}.data", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)))
}

/// The path of a data file's GCM tags file.
fn tags_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(".tags");
    PathBuf::from(s)
}

/// What the timed I/O goes to; shared by the load threads (positional I/O only).
struct Target {
    /// The data file or device, with O_DIRECT when asked.
    data: File,
    /// GCM: the tags file (always through the page cache).
    tags: Option<File>,
    /// `cache = cached`: the decrypted copy the reads come from.
    memfd: Option<File>,
}

/// Where the sectors sit below the layer, for the on-disk checks: a file, the byte offset of
/// sector 0 in it, and the tweaks sector k may have been encrypted with (`k × m` for each m).
struct Raw {
    path: PathBuf,
    offset: u64,
    tweak_units: Vec<u64>,
}

fn io_err(what: &str, e: std::io::Error) -> BackendError {
    BackendError::Failed(format!("{what}: {e}"))
}

/// `fdatasync`, then drop the file's pages from the page cache.
fn drop_cached(f: &File, what: &str) -> Result<(), BackendError> {
    use std::os::fd::AsRawFd;
    f.sync_data().map_err(|e| io_err(&format!("fdatasync of the {what}"), e))?;
    // SAFETY: a valid open descriptor; offset 0 and length 0 mean the whole file.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io_err(&format!("posix_fadvise(DONTNEED) of the {what}"), std::io::Error::from_raw_os_error(rc)));
    }
    Ok(())
}

/// Write the whole file through `crypt`: each sector's pattern, encrypted, then `fdatasync`.
fn prepare(data: &File, tags: Option<&File>, crypt: &mut Crypt, file_bytes: u64) -> Result<(), String> {
    let mut buf = AlignedBuf::new(CHUNK.min(file_bytes as usize));
    let mut slots = vec![0u8; buf.len() / SECTOR * TAG_SLOT];
    let mut off = 0u64;
    while off < file_bytes {
        let n = (file_bytes - off).min(buf.len() as u64) as usize;
        let first = off / SECTOR as u64;
        for (k, s) in buf[..n].chunks_exact_mut(SECTOR).enumerate() {
            fill_plaintext(first + k as u64, s);
        }
        let slots = &mut slots[..n / SECTOR * TAG_SLOT];
        crypt.encrypt(first, &mut buf[..n], slots).map_err(|e| format!("encrypting the file: {e}"))?;
        data.write_all_at(&buf[..n], off).map_err(|e| format!("writing the file: {e}"))?;
        if let Some(t) = tags {
            t.write_all_at(slots, first * TAG_SLOT as u64).map_err(|e| format!("writing the tags file: {e}"))?;
        }
        off += n as u64;
    }
    data.sync_data().map_err(|e| format!("fdatasync of the file: {e}"))?;
    if let Some(t) = tags {
        t.sync_data().map_err(|e| format!("fdatasync of the tags file: {e}"))?;
    }
    Ok(())
}

/// Read the whole file through `crypt` (decrypting, GCM verifying), check every sector against
/// its pattern, and copy the plaintext into a new memfd: the cached copy.
fn cached_copy(data: &File, tags: Option<&File>, crypt: &mut Crypt, file_bytes: u64) -> Result<File, String> {
    use std::os::fd::FromRawFd;
    // SAFETY: a valid NUL-terminated name; on success the new descriptor is ours.
    let fd = unsafe { libc::memfd_create(c"cryptoperf-storage-cache".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let memfd = unsafe { File::from_raw_fd(fd) };
    memfd.set_len(file_bytes).map_err(|e| format!("sizing the cached copy: {e}"))?;
    let mut buf = AlignedBuf::new(CHUNK.min(file_bytes as usize));
    let mut want = vec![0u8; SECTOR];
    let mut slots = vec![0u8; buf.len() / SECTOR * TAG_SLOT];
    let mut off = 0u64;
    while off < file_bytes {
        let n = (file_bytes - off).min(buf.len() as u64) as usize;
        let first = off / SECTOR as u64;
        data.read_exact_at(&mut buf[..n], off).map_err(|e| format!("reading the file: {e}"))?;
        let slots = &mut slots[..n / SECTOR * TAG_SLOT];
        if let Some(t) = tags {
            t.read_exact_at(slots, first * TAG_SLOT as u64).map_err(|e| format!("reading the tags file: {e}"))?;
        }
        crypt.decrypt(first, &mut buf[..n], slots).map_err(|e| format!("decrypting the file: {e}"))?;
        for (k, s) in buf[..n].chunks_exact(SECTOR).enumerate() {
            fill_plaintext(first + k as u64, &mut want);
            if s != &want[..] {
                return Err(format!("sector {} did not decrypt to the plaintext written", first + k as u64));
            }
        }
        memfd.write_all_at(&buf[..n], off).map_err(|e| format!("filling the cached copy: {e}"))?;
        off += n as u64;
    }
    Ok(memfd)
}

/// Bytes of memory available (`MemAvailable` of /proc/meminfo), or None.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

// ---- the checks before timing ----------------------------------------------------------------

/// The outcome of the checks before timing, as the result's `validation`.
#[derive(Debug, Clone, serde::Serialize)]
struct StorageValidation {
    /// `pass`, `fail: <why>` or `not applicable (<why>)`.
    kat: String,
    kat_source: String,
    /// Whether the sectors on disk hold what they must (ciphertext unlike the plaintext, or for
    /// `clear` the plaintext): `pass: …`, `fail: …`.
    on_disk: String,
    /// The raw sectors decrypted by another library: `pass: <library> …`, `fail: …`, or
    /// `not applicable (clear)`.
    cross_decrypt: String,
    /// The cross-decryption as the primitives report theirs.
    cross_checks: Vec<CrossCheck>,
}

impl StorageValidation {
    fn failure(&self) -> Option<String> {
        let bad = |s: &str| s.starts_with("fail");
        if bad(&self.kat) {
            return Some(format!("known-answer test: {} ({})", self.kat, self.kat_source));
        }
        if bad(&self.on_disk) {
            return Some(format!("on-disk check: {}", self.on_disk));
        }
        if bad(&self.cross_decrypt) {
            return Some(format!("cross-library decryption: {}", self.cross_decrypt));
        }
        None
    }

    fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The known-answer test of the scheme on `backend`: `(kat, source)`.
fn known_answer(backend: &dyn Backend, scheme: Scheme) -> Result<(String, String), BackendError> {
    let name = backend.info().backend;
    if scheme == Scheme::Clear {
        return Ok(("not applicable (clear: nothing is encrypted)".into(), String::new()));
    }
    // (The scripted `mock` only; the tests' deliberately broken backends get the test.)
    if name == "mock" {
        return Ok((format!("not applicable ({name} is a scripted test backend)"), String::new()));
    }
    let verdict = |r: std::result::Result<(), String>| match r {
        Ok(()) => "pass".to_string(),
        Err(why) => format!("fail: {why}"),
    };
    if let Some(bits) = scheme.xts() {
        let (source, r) = kat::xts_known_answer(backend, bits)?;
        return Ok((verdict(r), source));
    }
    // AES-256-GCM: the primitives' seal and open known answers (open also refuses a tampered tag).
    let mut kats = Vec::new();
    let mut source = String::new();
    for op in [Op::Seal(AeadAlg::Aes256Gcm), Op::Open(AeadAlg::Aes256Gcm)] {
        let params = Params::resolve(op, &RawParams::default()).map_err(failed)?;
        let v = kat::validate_against(backend, op, &params, &[])?;
        if v.kat != "pass" {
            kats.push(v.kat.to_string());
        }
        source = v.kat_source;
    }
    Ok((if kats.is_empty() { "pass".into() } else { kats.join("; ") }, source))
}

/// The library that checks `measured`'s output: RustCrypto, or OpenSSL when RustCrypto is the
/// one measured. Called directly, so also in the FIPS build.
fn checker_for(measured: &str) -> Box<dyn Backend> {
    if measured == "rustcrypto" {
        Box::new(backends::openssl::OpenSsl)
    } else {
        Box::new(backends::rustcrypto::RustCrypto)
    }
}

/// How `checker` is named in the validation: the library and the parts of it that decrypted.
fn checker_label(checker: &dyn Backend, scheme: Scheme) -> String {
    let i = checker.info();
    if i.backend != "rustcrypto" {
        return format!("{} {}", i.library, i.library_version);
    }
    let crates: Vec<&str> = i
        .library_version
        .split(", ")
        .filter(|c| match scheme {
            Scheme::Aes256Gcm => c.starts_with("aes-gcm "),
            _ => c.starts_with("xts-mode ") || c.starts_with("aes "),
        })
        .collect();
    format!("{} ({})", i.library, crates.join(", "))
}

/// The on-disk checks: sector 0 and the last sector read raw from below the layer; for an
/// encrypted scheme each differs from its plaintext and `checker` decrypts it back with the same
/// key (XTS: the same tweak; GCM: nonce, tag and AAD from the tags file), and a flipped GCM
/// ciphertext bit fails to authenticate with the measured `crypt`; for clear each equals the
/// plaintext. Returns `(on_disk, cross_decrypt, cross_checks)`.
fn on_disk_checks(
    raw: &Raw,
    tags: Option<&Path>,
    scheme: Scheme,
    key: &[u8],
    file_bytes: u64,
    checker: &dyn Backend,
    crypt: &mut Crypt,
) -> (String, String, Vec<CrossCheck>) {
    let last = file_bytes / SECTOR as u64 - 1;
    let sectors: Vec<u64> = if last == 0 { vec![0] } else { vec![0, last] };
    let which = sectors.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" and ");
    let read = |sector: u64| -> Result<(Vec<u8>, Vec<u8>), String> {
        let f = File::open(&raw.path).map_err(|e| format!("opening {}: {e}", raw.path.display()))?;
        let mut ct = vec![0u8; SECTOR];
        f.read_exact_at(&mut ct, raw.offset + sector * SECTOR as u64).map_err(|e| format!("reading sector {sector}: {e}"))?;
        let mut slot = vec![0u8; TAG_SLOT];
        if let Some(t) = tags {
            let t = File::open(t).map_err(|e| format!("opening the tags file: {e}"))?;
            t.read_exact_at(&mut slot, sector * TAG_SLOT as u64).map_err(|e| format!("reading sector {sector}'s tag: {e}"))?;
        }
        Ok((ct, slot))
    };
    let lib = checker.info();
    let lib_name = checker_label(checker, scheme);
    let mut on_disk = Ok(());
    let mut cross = Ok(String::new());
    for &sector in &sectors {
        let mut pt = vec![0u8; SECTOR];
        fill_plaintext(sector, &mut pt);
        let (ct, slot) = match read(sector) {
            Ok(x) => x,
            Err(e) => {
                let e = format!("fail: {e}");
                return (e.clone(), e, vec![]);
            }
        };
        if scheme == Scheme::Clear {
            if ct != pt {
                on_disk = Err(format!("sector {sector} on disk is not the plaintext written"));
            }
            continue;
        }
        if ct == pt {
            on_disk = on_disk.and(Err(format!("sector {sector} on disk is the plaintext: nothing was encrypted")));
            continue;
        }
        if scheme == Scheme::Aes256Gcm {
            if slot[..28].iter().all(|&b| b == 0) || slot[28..].iter().any(|&b| b != 0) {
                on_disk = on_disk.and(Err(format!("sector {sector}'s tag slot is not nonce ‖ tag ‖ 4 zero bytes")));
                continue;
            }
            // A flipped ciphertext bit must not authenticate with the measured library.
            let mut tampered = ct.clone();
            tampered[100] ^= 0x04;
            if crypt.decrypt(sector, &mut tampered, &slot).is_ok() {
                on_disk = on_disk.and(Err(format!("sector {sector} with a flipped ciphertext bit authenticated")));
            }
        }
        let decrypted = (|| -> Result<Vec<u8>, BackendError> {
            match scheme.xts() {
                Some(bits) => {
                    let mut x = checker.xts(bits, key)?;
                    let mut last_try = Vec::new();
                    for &unit in &raw.tweak_units {
                        let mut buf = ct.clone();
                        x.decrypt_sector(sector * unit, &mut buf)?;
                        if buf == pt {
                            return Ok(buf);
                        }
                        last_try = buf;
                    }
                    Ok(last_try)
                }
                None => {
                    let mut a = checker.aead(AeadAlg::Aes256Gcm, key)?;
                    let nonce: [u8; 12] = slot[..12].try_into().expect("12 bytes");
                    let mut sealed = ct.clone();
                    sealed.extend_from_slice(&slot[12..28]);
                    let mut out = Vec::new();
                    a.open(&nonce, &sector.to_le_bytes(), &sealed, &mut out)?;
                    Ok(out)
                }
            }
        })();
        cross = cross.and_then(|_| match decrypted {
            Ok(d) if d == pt => Ok(String::new()),
            Ok(_) => Err(format!("{lib_name} decrypted sector {sector} to other bytes than the plaintext written")),
            Err(e) => Err(format!("{lib_name} could not decrypt sector {sector}: {e}")),
        });
    }
    let on_disk = match on_disk {
        Ok(()) if scheme == Scheme::Clear => format!("pass: sectors {which} on disk are the plaintext written"),
        Ok(()) => format!("pass: sectors {which} on disk differ from the plaintext written"),
        Err(why) => format!("fail: {why}"),
    };
    if scheme == Scheme::Clear {
        return (on_disk, "not applicable (clear)".into(), vec![]);
    }
    let what = if scheme == Scheme::Aes256Gcm { "nonce, tag and AAD" } else { "tweak" };
    let (cross_decrypt, status, detail) = match cross {
        Ok(_) => {
            let d = format!("{lib_name} decrypted sectors {which}, read raw from the file, to the plaintext written (same key and {what})");
            (format!("pass: {d}"), "pass", d)
        }
        Err(why) => (format!("fail: {why}"), "fail", why),
    };
    let check = CrossCheck { with: lib.backend.to_string(), status, detail: format!("storage: {detail}") };
    (on_disk, cross_decrypt, vec![check])
}

// ---- the run ---------------------------------------------------------------------------------

/// Reads and writes done, counted by the load threads (reset before the window).
#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
}

/// Which block a thread's next I/O touches: thread i of n owns blocks [i·B/n, (i+1)·B/n) of the
/// file's B blocks ([`Walk::region`]); sequential walks them in order and wraps, random picks one
/// uniformly each time.
struct Walk {
    first: u64,
    blocks: u64,
    cursor: u64,
    random: Option<Prng>,
}

impl Walk {
    /// Thread `i` of `threads` over a file of `blocks` blocks (`blocks` ≥ `threads`).
    fn region(i: usize, threads: usize, blocks: u64, random: bool) -> Walk {
        let (first, end) = (i as u64 * blocks / threads as u64, (i as u64 + 1) * blocks / threads as u64);
        let seed = 0x6372_7970_746f_7066 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Walk { first, blocks: end - first, cursor: 0, random: random.then_some(Prng(seed)) }
    }

    fn next(&mut self) -> u64 {
        match &mut self.random {
            Some(rng) => self.first + rng.below(self.blocks),
            None => {
                let b = self.first + self.cursor;
                self.cursor = (self.cursor + 1) % self.blocks;
                b
            }
        }
    }
}

/// One load thread's I/O: its region, buffers and layer.
struct IoThread {
    target: Arc<Target>,
    crypt: Crypt,
    /// The I/O buffer (aligned for O_DIRECT).
    buf: AlignedBuf,
    /// The plaintext this thread writes (writes only).
    plain: Option<AlignedBuf>,
    /// The block's tag slots (GCM).
    slots: Vec<u8>,
    walk: Walk,
    /// Decides read or write (mixed); seeded apart from the walk's.
    rng: Prng,
    read_pct: u32,
    fsync_each: bool,
    counters: Arc<Counters>,
}

impl IoThread {
    /// One I/O: choose the block, then read or write it.
    fn io(&mut self) -> Result<(), BackendError> {
        let block = self.walk.next();
        let read = match self.read_pct {
            100 => true,
            0 => false,
            pct => self.rng.below(100) < pct as u64,
        };
        let len = self.buf.len();
        let off = block * len as u64;
        let first = off / SECTOR as u64;
        let t = &*self.target;
        if read {
            if let Some(m) = &t.memfd {
                m.read_exact_at(&mut self.buf, off).map_err(|e| io_err("pread of the cached copy", e))?;
            } else {
                t.data.read_exact_at(&mut self.buf, off).map_err(|e| io_err("pread", e))?;
                if let Some(tags) = &t.tags {
                    tags.read_exact_at(&mut self.slots, first * TAG_SLOT as u64).map_err(|e| io_err("pread of the tags", e))?;
                }
                self.crypt.decrypt(first, &mut self.buf, &self.slots)?;
            }
            self.counters.reads.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let plain = self.plain.as_ref().expect("a writing thread has its plaintext");
        match self.crypt {
            Crypt::Clear => t.data.write_all_at(plain, off).map_err(|e| io_err("pwrite", e))?,
            _ => {
                self.buf.copy_from_slice(plain);
                self.crypt.encrypt(first, &mut self.buf, &mut self.slots)?;
                t.data.write_all_at(&self.buf, off).map_err(|e| io_err("pwrite", e))?;
            }
        }
        if let Some(tags) = &t.tags {
            tags.write_all_at(&self.slots, first * TAG_SLOT as u64).map_err(|e| io_err("pwrite of the tags", e))?;
        }
        if self.fsync_each {
            t.data.sync_data().map_err(|e| io_err("fdatasync", e))?;
            if let Some(tags) = &t.tags {
                tags.sync_data().map_err(|e| io_err("fdatasync of the tags", e))?;
            }
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Run `storage`: check, prepare the file, validate, measure at the case's load level, clean up.
pub fn run(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
    let Some(dir) = spec.dir.as_deref() else {
        return Finish::Invalid(ready_to_run(spec).err().unwrap_or_default(), json!({}));
    };
    let mut scratch = Scratch::default();
    match spec.layer {
        Layer::Userspace => run_userspace(case, spec, backend, dir, &mut scratch, warmup, budget),
        Layer::DmCrypt => {
            if let Some(why) = dm_crypt_unavailable() {
                return Finish::Unsupported(why, json!({}));
            }
            if spec.scheme == Scheme::Aes256Gcm {
                return Finish::Unsupported(DM_GCM.into(), json!({}));
            }
            dm::run(case, spec, dir, &mut scratch, warmup, budget)
        }
    }
    // `scratch` is dropped here: every file created is removed.
}

/// The userspace layer: the backend encrypts in this process.
fn run_userspace(
    case: &WorkloadCase,
    spec: &Spec,
    backend: &dyn Backend,
    dir: &Path,
    scratch: &mut Scratch,
    warmup: Duration,
    budget: Duration,
) -> Finish {
    // The scheme exists on this backend, and its known answers come out, before any file.
    let key = match Key::random(spec.scheme.key_len()) {
        Ok(k) => k,
        Err(e) => return Finish::Invalid(e, json!({})),
    };
    let mut prep = match Crypt::new(backend, spec.scheme, &key.0, u32::MAX) {
        Ok(c) => c,
        Err(BackendError::Unsupported(why)) => return Finish::Unsupported(why, json!({})),
        Err(BackendError::Failed(e)) => return Finish::Invalid(format!("the layer could not be set up: {e}"), json!({})),
    };
    let (kat, kat_source) = match known_answer(backend, spec.scheme) {
        Ok(k) => k,
        Err(BackendError::Unsupported(why)) => return Finish::Unsupported(why, json!({})),
        Err(BackendError::Failed(e)) => return Finish::Invalid(format!("validation could not run: {e}"), json!({})),
    };
    let mut validation = StorageValidation {
        kat,
        kat_source,
        on_disk: "not run".into(),
        cross_decrypt: "not run".into(),
        cross_checks: vec![],
    };
    if let Some(why) = validation.failure() {
        return Finish::Invalid(why, json!({"validation": validation.to_json()}));
    }
    let invalid = |why: String, v: &StorageValidation| Finish::Invalid(why, json!({"validation": v.to_json()}));
    // The file (and tags file), written in full through the layer.
    let path = data_path(dir);
    let gcm = spec.scheme == Scheme::Aes256Gcm;
    let prep_data = match scratch.create(path.clone()) {
        Ok(f) => f,
        Err(e) => return invalid(e, &validation),
    };
    let prep_tags = match gcm.then(|| scratch.create(tags_path(&path))).transpose() {
        Ok(t) => t,
        Err(e) => return invalid(e, &validation),
    };
    if let Err(e) = prepare(&prep_data, prep_tags.as_ref(), &mut prep, spec.file_bytes) {
        return invalid(format!("preparing the file: {e}"), &validation);
    }
    let raw = Raw { path: path.clone(), offset: 0, tweak_units: vec![1] };
    let checker = checker_for(backend.info().backend);
    let tags_file = gcm.then(|| tags_path(&path));
    let (on_disk, cross_decrypt, cross_checks) =
        on_disk_checks(&raw, tags_file.as_deref(), spec.scheme, &key.0, spec.file_bytes, &*checker, &mut prep);
    validation.on_disk = on_disk;
    validation.cross_decrypt = cross_decrypt;
    validation.cross_checks = cross_checks;
    if let Some(why) = validation.failure() {
        return invalid(why, &validation);
    }
    // The window's handles: the data file with O_DIRECT when asked; tags through the cache.
    let mut opts = OpenOptions::new();
    opts.read(true).write(true);
    if spec.direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    let data = match opts.open(&path) {
        Ok(f) => f,
        Err(e) if spec.direct && e.raw_os_error() == Some(libc::EINVAL) => {
            return Finish::Unsupported(
                format!("direct = true: the file system of dir {} does not support O_DIRECT (tmpfs?)", dir.display()),
                json!({"validation": validation.to_json()}),
            )
        }
        Err(e) => return invalid(format!("opening the file: {e}"), &validation),
    };
    let memfd = match spec.cache {
        Cache::Cold => None,
        Cache::Cached => {
            if let Some(avail) = mem_available().filter(|&a| spec.file_bytes > a / 2) {
                return invalid(
                    format!(
                        "cache = cached keeps the whole file ({} MiB) in memory; this host has {} MiB available: choose a smaller file_bytes",
                        spec.file_bytes >> 20,
                        avail >> 20
                    ),
                    &validation,
                );
            }
            match cached_copy(&prep_data, prep_tags.as_ref(), &mut prep, spec.file_bytes) {
                Ok(m) => Some(m),
                Err(e) => return invalid(format!("making the cached copy: {e}"), &validation),
            }
        }
    };
    let target = Arc::new(Target { data, tags: prep_tags.as_ref().and_then(|t| t.try_clone().ok()), memfd });
    if gcm && target.tags.is_none() {
        return invalid("could not share the tags file with the load threads".into(), &validation);
    }
    let library = if spec.scheme == Scheme::Clear {
        "none".to_string()
    } else {
        let i = backend.info();
        format!("{} {}", i.library, i.library_version)
    };
    let files: Vec<(&File, &str)> = std::iter::once((&prep_data, "data file")).chain(prep_tags.as_ref().map(|t| (t, "tags file"))).collect();
    measure(case, spec, backend, &key.0, target, &files, library, validation, warmup, budget)
}

/// Measure the window over `target`, each load thread with its own layer; `files` are flushed
/// and dropped from the page cache before a cold window, and flushed after it for `fsync = end`.
#[allow(clippy::too_many_arguments)]
fn measure(
    case: &WorkloadCase,
    spec: &Spec,
    backend: &dyn Backend,
    key: &[u8],
    target: Arc<Target>,
    files: &[(&File, &str)],
    library: String,
    validation: StorageValidation,
    warmup: Duration,
    budget: Duration,
) -> Finish {
    let threads = case.common.load.threads();
    let blocks = spec.file_bytes / spec.block_bytes as u64;
    // Each thread holds an I/O buffer, and a plaintext block when it writes.
    let per_thread = spec.block_bytes as u64 * if spec.direction == Direction::Read { 1 } else { 2 };
    if let Some(avail) = mem_available().filter(|&a| threads as u64 * per_thread > a / 2) {
        return Finish::Invalid(
            format!(
                "{threads} threads × {} MiB of buffers need {} MiB; this host has {} MiB available: choose a smaller block_bytes or fewer threads",
                per_thread >> 20,
                (threads as u64 * per_thread) >> 20,
                avail >> 20
            ),
            json!({"validation": validation.to_json()}),
        );
    }
    let counters = Arc::new(Counters::default());
    let next_thread = AtomicUsize::new(0);
    let make = || -> Result<TxnFn, BackendError> {
        let i = next_thread.fetch_add(1, Ordering::Relaxed);
        let walk = Walk::region(i, threads, blocks, spec.pattern == Pattern::Random);
        let writes = spec.direction != Direction::Read;
        let plain = writes.then(|| {
            let mut p = AlignedBuf::new(spec.block_bytes);
            let first = walk.first * (spec.block_bytes / SECTOR) as u64;
            for (k, s) in p.chunks_exact_mut(SECTOR).enumerate() {
                fill_plaintext(first + k as u64, s);
            }
            p
        });
        let mut t = IoThread {
            target: target.clone(),
            crypt: Crypt::new(backend, spec.scheme, key, i as u32)?,
            buf: AlignedBuf::new(spec.block_bytes),
            plain,
            slots: vec![0u8; spec.block_bytes / SECTOR * TAG_SLOT],
            walk,
            rng: Prng(0x6d69_7865_6421 ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9)),
            read_pct: spec.direction.read_pct(),
            fsync_each: spec.fsync == Fsync::Each,
            counters: counters.clone(),
        };
        Ok(Box::new(move || t.io()) as TxnFn)
    };
    let between = || -> Result<(), BackendError> {
        if spec.cache == Cache::Cold {
            for (f, what) in files {
                drop_cached(f, what)?;
            }
        }
        counters.reads.store(0, Ordering::Relaxed);
        counters.writes.store(0, Ordering::Relaxed);
        Ok(())
    };
    let v_json = validation.to_json();
    let timeline = sampler::Sampler::start();
    let measured = run_load_with(make, case.common.load, warmup, budget, between);
    let mut lm = match measured {
        Ok(lm) => lm,
        Err(BackendError::Unsupported(r)) => {
            let _ = timeline.stop();
            return Finish::Unsupported(r, json!({"validation": v_json}));
        }
        Err(BackendError::Failed(e)) => {
            let _ = timeline.stop();
            return Finish::Invalid(format!("I/O failed while measured: {e}"), json!({"validation": v_json}));
        }
    };
    let mut fsync_end_ns = 0;
    if spec.fsync == Fsync::End {
        let (cpu0, t0) = (sampler::process_cpu_ns(), clock::monotonic_ns());
        for (f, what) in files {
            if let Err(e) = f.sync_data() {
                let _ = timeline.stop();
                return Finish::Invalid(format!("fdatasync of the {what} after the window: {e}"), json!({"validation": v_json}));
            }
        }
        let (cpu1, t1) = (sampler::process_cpu_ns(), clock::monotonic_ns());
        fsync_end_ns = t1 - t0;
        lm.m.wall_ns += fsync_end_ns;
        lm.process_user_ns += cpu1.0.saturating_sub(cpu0.0);
        lm.process_system_ns += cpu1.1.saturating_sub(cpu0.1);
    }
    let samples = timeline.stop();
    let (reads, writes) = (counters.reads.load(Ordering::Relaxed), counters.writes.load(Ordering::Relaxed));
    if reads + writes != lm.m.ops {
        return Finish::Invalid(
            format!("the window timed {} I/Os but counted {reads} reads and {writes} writes", lm.m.ops),
            json!({"validation": v_json}),
        );
    }
    let block = spec.block_bytes as u64;
    let mut v = measured_fields(&lm, spec.block_bytes);
    v["client_timeline"] = serde_json::to_value(samples).unwrap_or_default();
    v["storage"] = json!({
        "scheme": spec.scheme.name(),
        "pattern": if spec.pattern == Pattern::Random { "random" } else { "sequential" },
        "direction": spec.direction.name(),
        "read_pct": spec.direction.read_pct(),
        "block_bytes": spec.block_bytes,
        "file_bytes": spec.file_bytes,
        "sector_bytes": SECTOR,
        "direct": spec.direct,
        "fsync": name_of(&FSYNCS, spec.fsync),
        "cache": name_of(&CACHES, spec.cache),
        "layer": name_of(&LAYERS, spec.layer),
        "reads": reads,
        "writes": writes,
        "bytes_read": reads * block,
        "bytes_written": writes * block,
        "process_user_ns": lm.process_user_ns,
        "process_system_ns": lm.process_system_ns,
        "fsync_end_ns": fsync_end_ns,
        "library": library,
    });
    v["validation"] = v_json;
    Finish::Ok(v)
}

// ---- dm-crypt --------------------------------------------------------------------------------

/// Why the dm-crypt layer cannot run on this host, or None: one line, starting
/// `dm-crypt layer unavailable: `. Checks, in order: device-mapper in the kernel and its
/// control node, root, `cryptsetup` and `losetup` on PATH, loop devices, the dm_crypt module
/// (loaded, or installed so the kernel can load it).
pub fn dm_crypt_unavailable() -> Option<String> {
    let why = |s: String| Some(format!("dm-crypt layer unavailable: {s}"));
    if !Path::new("/dev/mapper/control").exists() {
        let in_kernel = std::fs::read_to_string("/proc/misc").map(|m| m.contains("device-mapper")).unwrap_or(false);
        return why(if in_kernel {
            "/dev/mapper/control is missing (device-mapper is in the kernel, but its control node is not in /dev)".into()
        } else {
            "this kernel has no device-mapper (/dev/mapper/control missing)".into()
        });
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return why("the worker is not running as root (cryptsetup and losetup need it)".into());
    }
    for tool in ["cryptsetup", "losetup"] {
        if on_path(tool).is_none() {
            return why(format!("{tool} is not on PATH"));
        }
    }
    if !Path::new("/dev/loop-control").exists() {
        return why("no loop devices (/dev/loop-control missing)".into());
    }
    if !Path::new("/sys/module/dm_crypt").exists() {
        let installed = std::process::Command::new("modprobe")
            .args(["--dry-run", "--quiet", "dm_crypt"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !installed {
            return why("the dm_crypt kernel module is neither loaded nor installed".into());
        }
    }
    None
}

/// The executable `tool` in a directory of PATH, or None.
fn on_path(tool: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false))
}

/// The dm-crypt layer: a loop device over a file in `dir`, with a LUKS2 volume on it for the XTS
/// schemes. Not exercised where this was written (no device-mapper there): kept to plain steps,
/// each checked, and torn down by [`Volume`]'s `Drop` whatever happens.
mod dm {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// The loop device and the opened mapping, closed and detached when dropped.
    #[derive(Default)]
    pub(super) struct Volume {
        loop_dev: Option<String>,
        mapping: Option<String>,
    }

    impl Drop for Volume {
        fn drop(&mut self) {
            if let Some(name) = self.mapping.take() {
                if let Err(e) = tool("cryptsetup", &["close", &name], None) {
                    eprintln!("cryptoperf-worker: storage: {e}");
                }
            }
            if let Some(dev) = self.loop_dev.take() {
                if let Err(e) = tool("losetup", &["-d", &dev], None) {
                    eprintln!("cryptoperf-worker: storage: {e}");
                }
            }
        }
    }

    /// Run `name args`, with `stdin` fed to it; its stdout, or one line saying how it failed.
    fn tool(name: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<String, String> {
        let mut child = Command::new(name)
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{name}: {e}"))?;
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(data).map_err(|e| format!("{name}: writing its input: {e}"))?;
        }
        let out = child.wait_with_output().map_err(|e| format!("{name}: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
            return Err(format!("{name} {} failed ({}): {first}", args.first().copied().unwrap_or(""), out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// A memfd holding `bytes`, inheritable by a child (no close-on-exec), and its path as the
    /// child sees it (`/proc/self/fd/N`): how the volume key reaches cryptsetup without a file.
    fn key_memfd(bytes: &[u8]) -> Result<(File, String), String> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a valid NUL-terminated name; on success the descriptor is ours.
        let fd = unsafe { libc::memfd_create(c"cryptoperf-volume-key".as_ptr(), 0) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let f = unsafe { File::from_raw_fd(fd) };
        f.write_all_at(bytes, 0).map_err(|e| format!("writing the key's memfd: {e}"))?;
        let path = format!("/proc/self/fd/{}", f.as_raw_fd());
        Ok((f, path))
    }

    /// Set up the volume, then prepare, validate and measure as in userspace, on the device.
    pub(super) fn run(case: &WorkloadCase, spec: &Spec, dir: &Path, scratch: &mut Scratch, warmup: Duration, budget: Duration) -> Finish {
        let mut volume = Volume::default();
        let finish = run_on(case, spec, dir, scratch, &mut volume, warmup, budget);
        drop(volume);
        finish
    }

    fn run_on(
        case: &WorkloadCase,
        spec: &Spec,
        dir: &Path,
        scratch: &mut Scratch,
        volume: &mut Volume,
        warmup: Duration,
        budget: Duration,
    ) -> Finish {
        let key = match Key::random(spec.scheme.key_len()) {
            Ok(k) => k,
            Err(e) => return Finish::Invalid(e, json!({})),
        };
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut validation = StorageValidation {
            kat: if spec.scheme == Scheme::Clear {
                "not applicable (clear: nothing is encrypted)".into()
            } else {
                "not applicable (the kernel's dm-crypt encrypts; the kernel tests its AES-XTS when it registers it)".into()
            },
            kat_source: String::new(),
            on_disk: "not run".into(),
            cross_decrypt: "not run".into(),
            cross_checks: vec![],
        };
        let invalid = |why: String, v: &StorageValidation| Finish::Invalid(why, json!({"validation": v.to_json()}));
        let backing = data_path(dir).with_extension("img");
        let offset = if spec.scheme == Scheme::Clear { 0 } else { LUKS_DATA_OFFSET };
        let img = match scratch.create(backing.clone()) {
            Ok(f) => f,
            Err(e) => return invalid(e, &validation),
        };
        if let Err(e) = img.set_len(offset + spec.file_bytes) {
            return invalid(format!("sizing {}: {e}", backing.display()), &validation);
        }
        drop(img);
        let backing_s = backing.to_string_lossy().to_string();
        match tool("losetup", &["--find", "--show", "--sector-size", "4096", &backing_s], None) {
            Ok(dev) if dev.starts_with("/dev/") => volume.loop_dev = Some(dev),
            Ok(other) => return invalid(format!("losetup printed '{other}' instead of a device"), &validation),
            Err(e) => return invalid(e, &validation),
        }
        let loop_dev = volume.loop_dev.clone().unwrap_or_default();
        let device = if let Some(bits) = spec.scheme.xts() {
            let passphrase = match Key::random(32) {
                Ok(p) => hex::encode(&p.0),
                Err(e) => return invalid(e, &validation),
            };
            let (memfd, key_path) = match key_memfd(&key.0) {
                Ok(k) => k,
                Err(e) => return invalid(e, &validation),
            };
            // cryptsetup ≥ 2.7 names the option --volume-key-file; older ones --master-key-file.
            let help = tool("cryptsetup", &["--help"], None).unwrap_or_default();
            let key_opt = if help.contains("--volume-key-file") { "--volume-key-file" } else { "--master-key-file" };
            let key_bits = (bits.key_len() * 8).to_string();
            let format = [
                "luksFormat", "--batch-mode", "--type", "luks2", "--cipher", "aes-xts-plain64", "--key-size", &key_bits,
                "--sector-size", "4096", "--offset", "32768", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
                key_opt, &key_path, "--key-file", "-", &loop_dev,
            ];
            let formatted = tool("cryptsetup", &format, Some(passphrase.as_bytes()));
            drop(memfd);
            if let Err(e) = formatted {
                return invalid(e, &validation);
            }
            let name = format!("cryptoperf-{}-{}", std::process::id(), clock::monotonic_ns());
            if let Err(e) = tool("cryptsetup", &["open", "--type", "luks2", "--key-file", "-", &loop_dev, &name], Some(passphrase.as_bytes())) {
                return invalid(e, &validation);
            }
            volume.mapping = Some(name.clone());
            format!("/dev/mapper/{name}")
        } else {
            loop_dev.clone()
        };
        let open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(true);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(&device).map_err(|e| format!("opening {device}: {e}"))
        };
        let prep_dev = match open(false) {
            Ok(f) => f,
            Err(e) => return invalid(e, &validation),
        };
        // The kernel encrypts: the data goes to the device in clear from here.
        if let Err(e) = prepare(&prep_dev, None, &mut Crypt::Clear, spec.file_bytes) {
            return invalid(format!("preparing the volume: {e}"), &validation);
        }
        // LUKS2 with 4096-byte sectors counts the plain64 IV in 512-byte sectors unless
        // iv_large_sectors is set (cryptsetup sets it only for plain mode): try k × 8, then k.
        let raw = Raw { path: backing.clone(), offset, tweak_units: vec![8, 1] };
        let checker = backends::rustcrypto::RustCrypto;
        let (on_disk, cross_decrypt, cross_checks) =
            on_disk_checks(&raw, None, spec.scheme, &key.0, spec.file_bytes, &checker, &mut Crypt::Clear);
        validation.on_disk = on_disk;
        validation.cross_decrypt = cross_decrypt;
        validation.cross_checks = cross_checks;
        if let Some(why) = validation.failure() {
            return invalid(why, &validation);
        }
        let data = match open(spec.direct) {
            Ok(f) => f,
            Err(e) => return invalid(e, &validation),
        };
        let memfd = match spec.cache {
            Cache::Cold => None,
            Cache::Cached => match cached_copy(&prep_dev, None, &mut Crypt::Clear, spec.file_bytes) {
                Ok(m) => Some(m),
                Err(e) => return invalid(format!("making the cached copy: {e}"), &validation),
            },
        };
        let library = if spec.scheme == Scheme::Clear {
            "none".to_string()
        } else {
            format!("Linux {} dm-crypt (aes-xts-plain64)", release.trim())
        };
        let target = Arc::new(Target { data, tags: None, memfd });
        // The kernel encrypts, so every thread's layer here is clear.
        let clear = super::ClearBackend;
        let spec_clear = Spec { scheme: Scheme::Clear, ..spec.clone() };
        let mut finish = measure(case, &spec_clear, &clear, &[], target, &[(&prep_dev, "volume")], library, validation, warmup, budget);
        if let Finish::Ok(v) = &mut finish {
            v["storage"]["scheme"] = spec.scheme.name().into();
        }
        finish
    }
}

/// A backend with nothing: the load threads' layer when the kernel encrypts (dm-crypt), where
/// only `Crypt::Clear` is made.
struct ClearBackend;

impl Backend for ClearBackend {
    fn info(&self) -> backends::LibraryInfo {
        backends::LibraryInfo { backend: "none", library: "none".into(), library_version: String::new(), fips: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::conformance::{subjects, supports, Cap};
    use crate::workloads;

    /// A private directory under the system's temporary one, removed (with anything left in it)
    /// when dropped; `files()` lists what is in it.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "cryptoperf-storage-test-{}-{tag}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        fn path(&self) -> &str {
            self.0.to_str().unwrap()
        }
        fn files(&self) -> Vec<String> {
            std::fs::read_dir(&self.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    /// Parse a storage request with small defaults (256 KiB file, 16 KiB blocks) under `p`.
    fn case(backend: &str, dir: &TempDir, p: Value) -> WorkloadCase {
        let mut m = params(json!({"dir": dir.path(), "file_bytes": 262144, "block_bytes": 16384}));
        m.extend(params(p));
        workloads::parse(NAME, backend, &m).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Run a request for 50 ms after 10 ms of warm-up; the result's fields, or the reason.
    /// (One run at a time, and never beside a test that times CPU use.)
    fn run_on(b: &dyn Backend, dir: &TempDir, p: Value) -> Finish {
        let c = case(b.info().backend, dir, p);
        let _cpu = crate::measure::cpu_test_lock();
        workloads::run(&c, b, Duration::from_millis(10), Duration::from_millis(50))
    }

    fn ok(f: Finish, what: &str) -> Value {
        match f {
            Finish::Ok(v) => v,
            Finish::Unsupported(r, _) => panic!("{what}: unsupported: {r}"),
            Finish::Invalid(r, v) => panic!("{what}: invalid: {r} {v}"),
        }
    }

    /// Whether the table of `backends::conformance` gives `backend` the scheme.
    fn has(backend: &str, scheme: Scheme) -> bool {
        match scheme {
            Scheme::Clear => true,
            Scheme::Aes256Gcm => supports(backend, Cap::Aead(AeadAlg::Aes256Gcm)) == Some(true),
            x => supports(backend, Cap::Xts(x.xts().unwrap())) == Some(true),
        }
    }

    /// The sanity of an ok result: I/Os counted both ways, bytes = I/Os × block, the process CPU
    /// and the validation there.
    fn assert_sane(v: &Value, scheme: Scheme, measured: &str, what: &str) {
        let st = &v["storage"];
        let ops = v["ops"].as_u64().unwrap();
        let (reads, writes) = (st["reads"].as_u64().unwrap(), st["writes"].as_u64().unwrap());
        let block = st["block_bytes"].as_u64().unwrap();
        assert!(ops > 0, "{what}: no I/O");
        assert_eq!(reads + writes, ops, "{what}");
        assert_eq!(st["bytes_read"].as_u64(), Some(reads * block), "{what}");
        assert_eq!(st["bytes_written"].as_u64(), Some(writes * block), "{what}");
        assert_eq!(v["bytes_per_op"].as_u64(), Some(block), "{what}");
        assert_eq!(st["sector_bytes"], 4096);
        assert_eq!(st["scheme"], scheme.name(), "{what}");
        let cpu = st["process_user_ns"].as_u64().unwrap() + st["process_system_ns"].as_u64().unwrap();
        assert!(cpu > 0, "{what}: no process CPU over the window");
        assert!(v["cpu_ns_total"].as_u64().unwrap() > 0, "{what}");
        assert_eq!(v["workload"], NAME);
        assert_eq!(v["mode"], "file");
        assert!(v["client_timeline"].is_array());
        let val = &v["validation"];
        assert!(val["on_disk"].as_str().unwrap().starts_with("pass: "), "{what}: {val}");
        if scheme == Scheme::Clear {
            assert_eq!(st["library"], "none");
            assert_eq!(val["cross_decrypt"], "not applicable (clear)");
        } else {
            assert_eq!(val["kat"], "pass", "{what}: {val}");
            let other = if measured == "rustcrypto" { "OpenSSL" } else { "RustCrypto" };
            assert!(val["cross_decrypt"].as_str().unwrap().starts_with(&format!("pass: {other}")), "{what}: {val}");
            assert_eq!(val["cross_checks"][0]["status"], "pass");
            assert!(st["library"].as_str().unwrap().len() > 4);
        }
    }

    /// Every scheme on every backend of this build, under a closed and an open load, mixed reads
    /// and writes: an ok result with sane fields, or "unsupported" exactly where the backend
    /// lacks the scheme, with the library's reason; no file left behind either way.
    #[test]
    fn every_scheme_on_every_backend_runs_or_says_why_not() {
        for b in subjects() {
            let name = b.info().backend;
            for scheme in Scheme::ALL {
                for load in ["closed:2", "open:2000/2"] {
                    let dir = TempDir::new("every");
                    let what = format!("{name} {} {load}", scheme.name());
                    let p = json!({"scheme": scheme.name(), "load": load, "direction": "mixed:50", "pattern": "random"});
                    match run_on(&*b, &dir, p) {
                        Finish::Ok(v) => {
                            assert!(has(name, scheme), "{what}: ran, but the table says {name} lacks it");
                            assert_sane(&v, scheme, name, &what);
                            assert_eq!(v["load"]["kind"], load.split(':').next().unwrap());
                        }
                        Finish::Unsupported(why, _) => {
                            assert!(!has(name, scheme), "{what}: unsupported: {why}");
                            assert!(why.contains("XTS") && !why.contains('\n'), "{what}: {why}");
                        }
                        Finish::Invalid(why, v) => panic!("{what}: invalid: {why} {v}"),
                    }
                    assert!(dir.files().is_empty(), "{what}: left {:?}", dir.files());
                }
            }
        }
    }

    /// ring has no XTS, AWS-LC no AES-128-XTS: their reasons, as `run` and `check` give them.
    #[test]
    fn the_backends_without_an_xts_key_size_say_so() {
        let cases = [("ring", Scheme::Aes128Xts, "ring has no AES-XTS"), ("ring", Scheme::Aes256Xts, "ring has no AES-XTS"),
                     ("aws-lc", Scheme::Aes128Xts, "AWS-LC has no AES-128-XTS (EVP_aes_256_xts is its only XTS cipher)")];
        for (name, scheme, want) in cases {
            let b = backends::by_name(name).unwrap();
            let dir = TempDir::new("no-xts");
            let c = case(name, &dir, json!({"scheme": scheme.name()}));
            let workloads::Spec::Storage(spec) = &c.spec else { unreachable!() };
            assert_eq!(check(spec, &*b).unwrap_err(), want);
            match run_on(&*b, &dir, json!({"scheme": scheme.name()})) {
                Finish::Unsupported(why, _) => assert_eq!(why, want),
                _ => panic!("{name} {}: not unsupported", scheme.name()),
            }
            assert!(dir.files().is_empty());
        }
        // And what they have, check accepts without writing anything.
        let dir = TempDir::new("check");
        for (name, scheme) in [("ring", Scheme::Aes256Gcm), ("aws-lc", Scheme::Aes256Xts), ("openssl", Scheme::Aes128Xts), ("rustcrypto", Scheme::Clear)] {
            let c = case(name, &dir, json!({"scheme": scheme.name()}));
            let workloads::Spec::Storage(spec) = &c.spec else { unreachable!() };
            assert_eq!(check(spec, &*backends::by_name(name).unwrap()), Ok(()), "{name} {}", scheme.name());
        }
        assert!(dir.files().is_empty());
    }

    /// The known-answer test each backend passes at each key size it has (IEEE 1619 vectors), or
    /// its reason; GCM's through the primitives' vectors.
    #[test]
    fn known_answers_per_backend_and_key_size() {
        for b in subjects() {
            let name = b.info().backend;
            for scheme in [Scheme::Aes128Xts, Scheme::Aes256Xts, Scheme::Aes256Gcm] {
                match known_answer(&*b, scheme) {
                    Ok((kat, source)) => {
                        assert!(has(name, scheme), "{name} {}", scheme.name());
                        assert_eq!(kat, "pass", "{name} {}: {source}", scheme.name());
                        let want = if scheme == Scheme::Aes256Gcm { "GCM specification" } else { "IEEE Std 1619-2007 Annex B" };
                        assert!(source.starts_with(want), "{source}");
                    }
                    Err(BackendError::Unsupported(why)) => assert!(!has(name, scheme), "{name} {}: {why}", scheme.name()),
                    Err(e) => panic!("{name} {}: {e}", scheme.name()),
                }
            }
        }
    }

    /// A backend whose ciphers are wrong (OpenSSL with one output bit flipped) fails the
    /// known-answer test: invalid, and no file was ever created.
    #[test]
    fn a_wrong_cipher_fails_its_known_answer_test_before_any_file() {
        let broken = crate::kat::tests::Broken;
        for scheme in [Scheme::Aes128Xts, Scheme::Aes256Xts, Scheme::Aes256Gcm] {
            let dir = TempDir::new("broken");
            let c = case("openssl", &dir, json!({"scheme": scheme.name()}));
            match workloads::run(&c, &broken, Duration::ZERO, Duration::from_millis(20)) {
                Finish::Invalid(why, v) => {
                    assert!(why.starts_with("known-answer test: fail"), "{}: {why}", scheme.name());
                    assert!(v["validation"]["kat"].as_str().unwrap().starts_with("fail"));
                    assert_eq!(v["validation"]["on_disk"], "not run");
                }
                _ => panic!("{}: a broken cipher was not caught", scheme.name()),
            }
            assert!(dir.files().is_empty());
        }
    }

    /// A layer that does not encrypt (the scripted mock's ciphers leave data as it is) writes
    /// plaintext to disk: the on-disk check catches it, invalid, nothing timed, files removed.
    #[test]
    fn a_layer_that_does_not_encrypt_is_caught_on_disk() {
        let mock = backends::by_name("mock").unwrap();
        for scheme in [Scheme::Aes256Xts, Scheme::Aes256Gcm] {
            let dir = TempDir::new("mock");
            match run_on(&*mock, &dir, json!({"scheme": scheme.name()})) {
                Finish::Invalid(why, v) => {
                    assert!(why.starts_with("on-disk check: fail: sector 0 on disk is the plaintext"), "{why}");
                    assert!(v.get("ops").is_none(), "nothing is timed");
                }
                _ => panic!("{}: plaintext on disk was not caught", scheme.name()),
            }
            assert!(dir.files().is_empty());
        }
        // clear on mock runs (nominal).
        let dir = TempDir::new("mock-clear");
        ok(run_on(&*mock, &dir, json!({})), "mock clear");
    }

    /// Prepare a file through `crypt`, as a run does.
    fn prepared(dir: &TempDir, scheme: Scheme, b: &dyn Backend, key: &[u8], file_bytes: u64) -> (PathBuf, Crypt) {
        let path = dir.0.join("f.data");
        let mut crypt = Crypt::new(b, scheme, key, 7).unwrap();
        let data = OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
        let tags = (scheme == Scheme::Aes256Gcm)
            .then(|| OpenOptions::new().read(true).write(true).create_new(true).open(tags_path(&path)).unwrap());
        prepare(&data, tags.as_ref(), &mut crypt, file_bytes).unwrap();
        (path, crypt)
    }

    /// The file on disk holds ciphertext, not the plaintext, and another library decrypts it
    /// with the same key and tweak (or nonce, tag and AAD); a wrong decrypting library fails.
    #[test]
    fn the_file_holds_ciphertext_that_another_library_decrypts() {
        for b in subjects() {
            let name = b.info().backend;
            for scheme in [Scheme::Aes128Xts, Scheme::Aes256Xts, Scheme::Aes256Gcm].into_iter().filter(|s| has(name, *s)) {
                let dir = TempDir::new("disk");
                let key = Key::random(scheme.key_len()).unwrap();
                let (path, mut crypt) = prepared(&dir, scheme, &*b, &key.0, 64 * 1024);
                let raw_bytes = std::fs::read(&path).unwrap();
                let mut pt = vec![0u8; SECTOR];
                for s in 0..16 {
                    fill_plaintext(s, &mut pt);
                    assert_ne!(&raw_bytes[s as usize * SECTOR..][..SECTOR], &pt[..], "{name}: sector {s} is plaintext");
                }
                let raw = Raw { path: path.clone(), offset: 0, tweak_units: vec![1] };
                let tags = (scheme == Scheme::Aes256Gcm).then(|| tags_path(&path));
                let checker = checker_for(name);
                let (on_disk, cross, checks) = on_disk_checks(&raw, tags.as_deref(), scheme, &key.0, 64 * 1024, &*checker, &mut crypt);
                assert_eq!(on_disk, "pass: sectors 0 and 15 on disk differ from the plaintext written", "{name}");
                assert!(cross.starts_with(&format!("pass: {}", checker.info().library)), "{name}: {cross}");
                assert_eq!((checks.len(), checks[0].status), (1, "pass"));
                // A decrypting library that gets it wrong is caught.
                let broken = crate::kat::tests::Broken;
                let (_, cross, _) = on_disk_checks(&raw, tags.as_deref(), scheme, &key.0, 64 * 1024, &broken, &mut crypt);
                assert!(cross.starts_with("fail: "), "{name} {}: {cross}", scheme.name());
            }
        }
    }

    /// GCM: a flipped ciphertext bit, a flipped tag bit, a sector moved to another place (the
    /// AAD is its number) each fail to authenticate on read, naming the sector; the intact file
    /// reads back.
    #[test]
    fn gcm_tampering_is_detected() {
        for b in subjects() {
            let dir = TempDir::new("tamper");
            let key = Key::random(32).unwrap();
            let (path, mut crypt) = prepared(&dir, Scheme::Aes256Gcm, &*b, &key.0, 32 * 1024);
            let data = std::fs::read(&path).unwrap();
            let tags = std::fs::read(tags_path(&path)).unwrap();
            let read = |crypt: &mut Crypt, data: &[u8], tags: &[u8]| {
                let mut buf = data.to_vec();
                crypt.decrypt(0, &mut buf, tags)
            };
            read(&mut crypt, &data, &tags).unwrap_or_else(|e| panic!("{}: intact file: {e}", b.info().backend));
            let mut flipped = data.clone();
            flipped[3 * SECTOR + 17] ^= 1;
            let e = read(&mut crypt, &flipped, &tags).unwrap_err().to_string();
            assert!(e.starts_with("sector 3: AES-256-GCM"), "{e}");
            let mut bad_tag = tags.clone();
            bad_tag[5 * TAG_SLOT + 12] ^= 1;
            assert!(read(&mut crypt, &data, &bad_tag).unwrap_err().to_string().starts_with("sector 5:"));
            let mut moved = data.clone();
            moved.copy_within(..SECTOR, SECTOR);
            let mut moved_tags = tags.clone();
            moved_tags.copy_within(..TAG_SLOT, TAG_SLOT);
            assert!(read(&mut crypt, &moved, &moved_tags).unwrap_err().to_string().starts_with("sector 1:"));
        }
    }

    /// Nonces are unique: each write seals with the writer's id and a counter, so rewriting a
    /// sector stores a new nonce.
    #[test]
    fn gcm_nonces_are_fresh_per_write() {
        let b = backends::by_name("aws-lc").unwrap();
        let key = Key::random(32).unwrap();
        let mut c = Crypt::new(&*b, Scheme::Aes256Gcm, &key.0, 9).unwrap();
        let (mut x, mut y) = (vec![1u8; 2 * SECTOR], vec![1u8; 2 * SECTOR]);
        let (mut tx, mut ty) = (vec![0u8; 2 * TAG_SLOT], vec![0u8; 2 * TAG_SLOT]);
        c.encrypt(4, &mut x, &mut tx).unwrap();
        c.encrypt(4, &mut y, &mut ty).unwrap();
        assert_ne!(x, y, "the same plaintext sealed twice gave the same ciphertext");
        assert_eq!(&tx[..12], &[0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&tx[TAG_SLOT..TAG_SLOT + 12], &[0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&ty[..12], &[0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert!(tx[28..32].iter().all(|&z| z == 0));
    }

    #[test]
    fn bad_parameters_get_one_line_each() {
        let dir = TempDir::new("params");
        let file = dir.0.join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let cases = [
            (json!({"scheme": "rot13"}), "unknown scheme 'rot13'; known: clear, aes-128-xts, aes-256-xts, aes-256-gcm"),
            (json!({"pattern": "zigzag"}), "unknown pattern 'zigzag'; known: sequential, random"),
            (json!({"direction": "sideways"}), "unknown direction 'sideways'; known: read, write, mixed:N"),
            (json!({"direction": "mixed:100"}), "unknown direction 'mixed:100'"),
            (json!({"direction": "mixed:0"}), "unknown direction 'mixed:0'"),
            (json!({"block_bytes": 5000}), "block_bytes must be a multiple of 4096"),
            (json!({"block_bytes": 0}), "block_bytes must be a whole number in 4096..=16777216"),
            (json!({"block_bytes": 33554432}), "block_bytes must be a whole number in 4096..=16777216"),
            (json!({"file_bytes": 100000}), "file_bytes must be a whole number of blocks"),
            (json!({"file_bytes": 137438953472u64}), "file_bytes must be a whole number in 4096..=68719476736"),
            (json!({"file_bytes": 65536, "block_bytes": 65536, "load": "closed:2"}), "file_bytes (65536) must be at least threads × block_bytes = 2 × 65536 = 131072"),
            (json!({"file_bytes": 65536, "block_bytes": 65536, "load": "open:100"}), "at least threads × block_bytes = 32 × 65536"),
            (json!({"direct": "maybe"}), "direct must be true or false, got 'maybe'"),
            (json!({"fsync": "sometimes"}), "unknown fsync 'sometimes'; known: none, end, each"),
            (json!({"cache": "warm"}), "unknown cache 'warm'; known: cold, cached"),
            (json!({"layer": "zfs"}), "unknown layer 'zfs'; known: userspace, dm-crypt"),
            (json!({"cache": "cached", "direction": "write"}), "cache = cached applies to direction = read only"),
            (json!({"cache": "cached", "direction": "mixed:50"}), "got direction = mixed:50"),
            (json!({"cache": "cached", "direct": true}), "direct = true bypasses the page cache"),
            (json!({"load": "closed:0"}), "load 'closed:0'"),
            (json!({"mode": "memory"}), "unknown parameter 'mode' for storage; it takes: scheme, pattern, direction, block_bytes, file_bytes, direct, fsync, cache, layer, dir, load"),
            (json!({"port": 4433}), "unknown parameter 'port' for storage"),
            (json!({"stall_ms": 5}), "unknown parameter 'stall_ms' for storage"),
            (json!({"dir": "/nonexistent/cryptoperf"}), "dir '/nonexistent/cryptoperf' cannot be used: No such file or directory"),
            (json!({"dir": file.to_str().unwrap()}), "is not a directory"),
            (json!({"dir": 7}), "dir must be a directory's path, got 7"),
        ];
        for (p, want) in cases {
            let e = workloads::parse(NAME, "openssl", &params(p.clone())).err().unwrap_or_else(|| panic!("{p}: accepted"));
            assert!(e.contains(want), "{p}: {e}");
            assert!(!e.contains('\n'), "{p}: {e}");
        }
        // An unwritable directory (a 0500 one; as root, where permissions do not stop the
        // check, /proc/1, which is not writable even for root).
        let ro = TempDir::new("ro");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ro.0, std::fs::Permissions::from_mode(0o500)).unwrap();
        let unwritable = [ro.path(), "/proc/1"].into_iter().find(|d| {
            let c = std::ffi::CString::new(*d).unwrap();
            // SAFETY: a valid path.
            unsafe { libc::access(c.as_ptr(), libc::W_OK) != 0 }
        });
        if let Some(d) = unwritable {
            let e = workloads::parse(NAME, "openssl", &params(json!({"dir": d}))).err().unwrap();
            assert!(e.contains("is not writable"), "{e}");
        }
        std::fs::set_permissions(&ro.0, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Booleans and numbers as JSON or as text; the defaults.
        for (direct, want) in [(json!(true), true), (json!("TRUE"), true), (json!("false"), false)] {
            let c = workloads::parse(NAME, "openssl", &params(json!({"direct": direct}))).unwrap();
            let workloads::Spec::Storage(s) = c.spec else { unreachable!() };
            assert_eq!(s.direct, want);
        }
        let c = workloads::parse(NAME, "openssl", &Map::new()).unwrap();
        let workloads::Spec::Storage(s) = c.spec else { unreachable!() };
        assert_eq!((s.scheme, s.pattern, s.direction), (Scheme::Clear, Pattern::Sequential, Direction::Read));
        assert_eq!((s.block_bytes, s.file_bytes, s.direct), (65536, 64 << 20, false));
        assert_eq!((s.fsync, s.cache, s.layer, &s.dir), (Fsync::None, Cache::Cold, Layer::Userspace, &None));
        assert_eq!(c.common.mode, workloads::Mode::File);
        assert_eq!(ready_to_run(&s).unwrap_err().lines().count(), 1);
    }

    /// Thread regions tile the file; sequential walks a region and wraps; random stays in its
    /// region and reaches every block of it.
    #[test]
    fn each_thread_walks_its_own_region() {
        let (threads, blocks) = (3, 10);
        let regions: Vec<Walk> = (0..threads).map(|i| Walk::region(i, threads, blocks, false)).collect();
        assert_eq!(regions.iter().map(|w| (w.first, w.blocks)).collect::<Vec<_>>(), vec![(0, 3), (3, 3), (6, 4)]);
        let mut w = Walk::region(2, threads, blocks, false);
        assert_eq!((0..9).map(|_| w.next()).collect::<Vec<_>>(), vec![6, 7, 8, 9, 6, 7, 8, 9, 6]);
        let mut r = Walk::region(1, threads, blocks, true);
        let mut seen = std::collections::BTreeMap::new();
        for _ in 0..3000 {
            *seen.entry(r.next()).or_insert(0) += 1;
        }
        assert_eq!(seen.keys().copied().collect::<Vec<_>>(), vec![3, 4, 5]);
        assert!(seen.values().all(|&n| n > 800), "{seen:?}");
        // Every sector's plaintext differs, and is not trivial.
        let (mut a, mut b) = (vec![0u8; SECTOR], vec![0u8; SECTOR]);
        fill_plaintext(0, &mut a);
        fill_plaintext(1, &mut b);
        assert_ne!(a, b);
        assert!(a.iter().filter(|&&x| x == 0).count() < 100);
    }

    /// Reads, writes and their variants each run: sequential direct reads (where the file system
    /// takes O_DIRECT), writes with an fdatasync each and at the end (timed into wall_ns).
    #[test]
    fn directions_direct_io_and_fsync_run() {
        let b = backends::by_name("aws-lc").unwrap();
        let dir = TempDir::new("variants");
        let v = ok(run_on(&*b, &dir, json!({"scheme": "aes-256-xts", "direction": "write", "fsync": "end"})), "fsync end");
        assert_sane(&v, Scheme::Aes256Xts, "aws-lc", "fsync end");
        let st = &v["storage"];
        assert_eq!((st["reads"].as_u64(), st["fsync"].as_str()), (Some(0), Some("end")));
        let fsync_ns = st["fsync_end_ns"].as_u64().unwrap();
        assert!(fsync_ns > 0 && v["wall_ns"].as_u64().unwrap() > fsync_ns);
        let v = ok(run_on(&*b, &dir, json!({"scheme": "aes-256-gcm", "direction": "write", "fsync": "each", "load": "closed:1"})), "fsync each");
        assert_eq!(v["storage"]["fsync_end_ns"], 0);
        assert!(v["storage"]["writes"].as_u64().unwrap() > 0);
        match run_on(&*b, &dir, json!({"scheme": "aes-256-xts", "direct": true})) {
            Finish::Ok(v) => {
                assert_sane(&v, Scheme::Aes256Xts, "aws-lc", "direct");
                assert_eq!((v["storage"]["direct"].as_bool(), v["storage"]["writes"].as_u64()), (Some(true), Some(0)));
            }
            Finish::Unsupported(why, _) => assert!(why.contains("does not support O_DIRECT"), "{why}"),
            Finish::Invalid(why, _) => panic!("direct: {why}"),
        }
        assert!(dir.files().is_empty(), "{:?}", dir.files());
    }

    /// OpenSSL, counting the sectors it decrypts.
    struct Counting(Arc<AtomicU64>);
    struct CountingXts(Box<dyn SectorCipher>, Arc<AtomicU64>);
    impl SectorCipher for CountingXts {
        fn encrypt_sector(&mut self, s: u64, buf: &mut [u8]) -> backends::Result<()> {
            self.0.encrypt_sector(s, buf)
        }
        fn decrypt_sector(&mut self, s: u64, buf: &mut [u8]) -> backends::Result<()> {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0.decrypt_sector(s, buf)
        }
    }
    impl Backend for Counting {
        fn info(&self) -> backends::LibraryInfo {
            backends::LibraryInfo { backend: "counting", ..backends::openssl::OpenSsl.info() }
        }
        fn xts(&self, bits: XtsBits, key: &[u8]) -> backends::Result<Box<dyn SectorCipher>> {
            Ok(Box::new(CountingXts(backends::openssl::OpenSsl.xts(bits, key)?, self.0.clone())))
        }
    }

    /// cache = cached reads a copy decrypted once before the window: the window's reads decrypt
    /// nothing (the decryptions are the known answers' and the copy's, whatever the reads).
    #[test]
    fn cached_reads_decrypt_nothing_in_the_window() {
        let count = Arc::new(AtomicU64::new(0));
        let b = Counting(count.clone());
        let dir = TempDir::new("cached");
        // 64 KiB: 16 sectors, read 4 at a time.
        let p = json!({"scheme": "aes-128-xts", "cache": "cached", "file_bytes": 65536, "load": "closed:2"});
        let v = ok(run_on(&b, &dir, p), "cached");
        let st = &v["storage"];
        assert_eq!((st["cache"].as_str(), st["writes"].as_u64()), (Some("cached"), Some(0)));
        let reads = st["reads"].as_u64().unwrap();
        let decrypted = count.load(Ordering::Relaxed);
        // 3 known-answer vectors, 16 sectors copied.
        assert_eq!(decrypted, 3 + 16, "{reads} reads");
        assert!(reads * 4 > decrypted, "too few reads ({reads}) to tell");
        assert!(dir.files().is_empty());
    }

    /// The dm-crypt layer where the host has no device-mapper: unsupported with one line, from
    /// `run` and from `check`, nothing written. (Where it has one, the line, if any, still has
    /// the prefix.)
    #[test]
    fn dm_crypt_says_why_it_cannot_run_here() {
        let b = backends::by_name("aws-lc").unwrap();
        let dir = TempDir::new("dm");
        let no_dm = !Path::new("/dev/mapper/control").exists()
            && !std::fs::read_to_string("/proc/misc").unwrap_or_default().contains("device-mapper");
        for scheme in Scheme::ALL {
            let c = case("aws-lc", &dir, json!({"layer": "dm-crypt", "scheme": scheme.name()}));
            let workloads::Spec::Storage(spec) = &c.spec else { unreachable!() };
            let checked = check(spec, &*b);
            if no_dm {
                let want = "dm-crypt layer unavailable: this kernel has no device-mapper (/dev/mapper/control missing)";
                assert_eq!(dm_crypt_unavailable().as_deref(), Some(want));
                assert_eq!(checked, Err(want.to_string()));
                match workloads::run(&c, &*b, Duration::ZERO, Duration::from_millis(20)) {
                    Finish::Unsupported(why, _) => assert_eq!(why, want),
                    _ => panic!("dm-crypt ran without device-mapper"),
                }
            } else if let Some(why) = dm_crypt_unavailable() {
                assert!(why.starts_with("dm-crypt layer unavailable: ") && !why.contains('\n'), "{why}");
            }
            assert!(dir.files().is_empty());
        }
    }

    /// Through the protocol: `run` without `dir` is refused with one line; `check` needs no
    /// `dir` and answers for the backend and the host; `hello` announces storage's parameters,
    /// defaults, the required `dir` and the enumerations.
    #[test]
    fn the_protocol_requires_dir_to_run_but_not_to_check() {
        let dir = TempDir::new("protocol");
        let lines = [
            r#"{"type":"hello","protocol":1}"#.to_string(),
            r#"{"type":"run","id":"a","backend":"aws-lc","op":"storage","params":{"scheme":"aes-256-xts"}}"#.to_string(),
            r#"{"type":"check","id":"b","backend":"aws-lc","op":"storage","params":{"scheme":"aes-256-xts"}}"#.to_string(),
            r#"{"type":"check","id":"c","backend":"aws-lc","op":"storage","params":{"scheme":"aes-128-xts"}}"#.to_string(),
            format!(
                r#"{{"type":"run","id":"d","backend":"aws-lc","op":"storage","params":{{"scheme":"aes-256-gcm","dir":"{}","file_bytes":131072,"block_bytes":8192}},"seconds":0.03,"warmup_s":0.01}}"#,
                dir.path()
            ),
        ];
        let mut out = Vec::new();
        let cpu = crate::measure::cpu_test_lock();
        crate::protocol::serve(lines.join("\n").as_bytes(), &mut out).unwrap();
        drop(cpu);
        let out: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!((out[1]["type"].as_str(), out[1]["code"].as_str()), (Some("error"), Some("bad_params")));
        assert!(out[1]["message"].as_str().unwrap().starts_with("storage: dir is required"), "{}", out[1]);
        assert_eq!((out[2]["type"].as_str(), out[2]["status"].as_str()), (Some("checked"), Some("supported")));
        assert_eq!(out[3]["status"], "unsupported");
        assert!(out[3]["reason"].as_str().unwrap().contains("AES-128-XTS"), "{}", out[3]);
        assert_eq!(out[4]["status"], "ok", "{}", out[4]);
        assert_eq!(out[4]["fips"], cfg!(feature = "fips"));
        assert_eq!(out[4]["storage"]["library"].as_str().unwrap().split(' ').next(), Some("AWS-LC"));
        assert!(dir.files().is_empty());
        let hello = &out[0];
        let entry = &hello["op_params"][NAME];
        assert_eq!(entry["required"], json!(["dir"]));
        assert_eq!(entry["params"], json!(["scheme", "pattern", "direction", "block_bytes", "file_bytes", "direct", "fsync", "cache", "layer", "dir", "load"]));
        assert_eq!(entry["defaults"]["block_bytes"], 65536);
        assert_eq!(entry["defaults"]["direct"], "false");
        assert_eq!(hello["param_values"]["scheme"], json!(["clear", "aes-128-xts", "aes-256-xts", "aes-256-gcm"]));
        assert_eq!(hello["param_values"]["layer"], json!(["userspace", "dm-crypt"]));
        assert!(hello["param_values"].get("direction").is_none());
        assert!(hello["ops"].as_array().unwrap().contains(&json!("storage")));
    }
}
