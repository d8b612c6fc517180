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

mod checks;
mod dmcrypt;
mod layer;
mod measure;
mod spec;
#[cfg(test)]
mod tests;

use super::base::{Common, Finish, LevelKind, MemorySizing, Mode, Params, Sizing, TransactionName, Workload,
                  WorkloadCase, WorkloadSpec, PROCESS_BYTES, RESULT_BYTES, RESULT_BYTES_PER_S, THREAD_BYTES};
use crate::backends::{Backend, BackendError};
use serde_json::Map;
use std::time::Duration;
use dmcrypt::dm_crypt_unavailable;
use layer::{Crypt, Key, Scratch};
use measure::run_userspace;
pub use spec::*;

/// The `storage` workload.
pub struct Storage;

impl Workload for Storage {
    type Request = Spec;

    const NAME: &'static str = NAME;

    fn spec(&self) -> WorkloadSpec {
        let mut per_block = Map::new();
        // Each I/O thread holds an I/O buffer and, when it writes, a plaintext block.
        per_block.insert("block_bytes".into(), 2.into());
        WorkloadSpec {
            own_params: &PARAMS,
            common_params: &["load"],
            param_values: param_values(),
            defaults: defaults(),
            required: &REQUIRED,
            job_kinds: None,
            levels: &[LevelKind::Closed, LevelKind::Open, LevelKind::OpenBytes],
            bytes_per_tx_param: Some("block_bytes"),
            modes: &[],
            default_mode: Mode::File,
            server: false,
            server_under_test: None,
            file_params: &[],
            connection_params: &[],
            needs_dir: true,
            file_bytes_param: Some("file_bytes"),
            job: false,
            calibration_load: None,
            spread: None,
            transaction: TransactionName { one: "I/O", many: "I/Os" },
            sizing: Sizing {
                result_bytes: RESULT_BYTES,
                result_bytes_per_s: RESULT_BYTES_PER_S,
                result_bytes_per_target: 0,
                memory: MemorySizing {
                    base_bytes: PROCESS_BYTES,
                    per_connection_bytes: THREAD_BYTES,
                    per_connection_param: per_block,
                    ..MemorySizing::default()
                },
            },
        }
    }

    fn parse(&self, _: &str, params: &Params, common: &Common) -> Result<Spec, String> {
        let spec = parse(params)?;
        check_threads(&spec, common.load.threads())?;
        Ok(spec)
    }

    fn check(&self, spec: &Spec, backend: &dyn Backend) -> Result<(), String> {
        check(spec, backend)
    }

    fn run(&self, spec: &Spec, case: &WorkloadCase, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
        run(case, spec, backend, warmup, budget)
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

/// A fixed key with unequal halves, for `check` only.
fn probe_key(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

/// Run `storage`: check, prepare the file, validate, measure at the case's load level, clean up.
pub fn run(case: &WorkloadCase, spec: &Spec, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
    let Some(dir) = spec.dir.as_deref() else {
        return Finish::Invalid("dir is required to run".into(), None);
    };
    if spec.layer == Layer::DmCrypt {
        if let Some(why) = dm_crypt_unavailable() {
            return Finish::Unsupported(why, None);
        }
        if spec.scheme == Scheme::Aes256Gcm {
            return Finish::Unsupported(DM_GCM.into(), None);
        }
    }
    // The scheme's data key (dm-crypt: the volume key), fresh for every run, on either layer.
    let key = match Key::random(spec.scheme.key_len()) {
        Ok(k) => k,
        Err(e) => return Finish::Invalid(e, None),
    };
    let mut scratch = Scratch::default();
    match spec.layer {
        Layer::Userspace => run_userspace(case, spec, backend, &key, dir, &mut scratch, warmup, budget),
        Layer::DmCrypt => dmcrypt::run(case, spec, &key, dir, &mut scratch, warmup, budget),
    }
    // `scratch` is dropped here: every file created is removed.
}
