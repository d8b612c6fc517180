//! The run of the userspace layer: prepare and check the file, then measure the window with a
//! layer per load thread.

use crate::workloads::base::{Finish, Outcome, WorkloadCase};
use crate::backends::{Backend, BackendError};
use crate::result::{Measured, StorageFields, StorageResult, WorkloadDetail};
use crate::measure::load::{run_load_with, LoadMeasurement, TxnFn};
use crate::measure::{clock, sampler};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use super::checks::*;
use super::layer::*;
use super::spec::*;

/// Reads and writes done, counted by the load threads (reset before the window).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) reads: AtomicU64,
    pub(super) writes: AtomicU64,
}

/// Which block a thread's next I/O touches: thread i of n owns blocks [i·B/n, (i+1)·B/n) of the
/// file's B blocks ([`Walk::region`]); sequential walks them in order and wraps, random picks one
/// uniformly each time.
pub(super) struct Walk {
    pub(super) first: u64,
    pub(super) blocks: u64,
    pub(super) cursor: u64,
    pub(super) random: Option<Prng>,
}

impl Walk {
    /// Thread `i` of `threads` over a file of `blocks` blocks (`blocks` ≥ `threads`).
    pub(super) fn region(i: usize, threads: usize, blocks: u64, random: bool) -> Walk {
        let (first, end) = (i as u64 * blocks / threads as u64, (i as u64 + 1) * blocks / threads as u64);
        let seed = 0x6372_7970_746f_7066 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Walk { first, blocks: end - first, cursor: 0, random: random.then_some(Prng(seed)) }
    }

    pub(super) fn next(&mut self) -> u64 {
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
pub(super) struct IoThread {
    pub(super) target: Arc<Target>,
    pub(super) crypt: Crypt,
    /// The I/O buffer (aligned for O_DIRECT).
    pub(super) buf: AlignedBuf,
    /// The plaintext this thread writes (writes only).
    pub(super) plain: Option<AlignedBuf>,
    /// The block's tag slots (GCM).
    pub(super) slots: Vec<u8>,
    pub(super) walk: Walk,
    /// Decides read or write (mixed); seeded apart from the walk's.
    pub(super) rng: Prng,
    pub(super) read_pct: u32,
    pub(super) fsync_each: bool,
    pub(super) counters: Arc<Counters>,
}

impl IoThread {
    /// One I/O: choose the block, then read or write it.
    pub(super) fn io(&mut self) -> Result<(), BackendError> {
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

/// The scheme on this backend and its known answers, before any file: the preparing layer and
/// the validation so far, or the cell's answer.
fn layer_with_answers(spec: &Spec, backend: &dyn Backend, key: &Key) -> Result<(Crypt, StorageValidation), Finish> {
    let answer = |e: BackendError, what: &str| match e {
        BackendError::Unsupported(why) => Finish::Unsupported(why, None),
        BackendError::Failed(e) => Finish::Invalid(format!("{what}: {e}"), None),
    };
    let prep = Crypt::new(backend, spec.scheme, &key.0, u32::MAX).map_err(|e| answer(e, "the layer could not be set up"))?;
    let (kat, kat_source) = known_answer(backend, spec.scheme).map_err(|e| answer(e, "validation could not run"))?;
    let validation = StorageValidation { kat, kat_source, on_disk: "not run".into(), cross_decrypt: "not run".into(), cross_checks: vec![] };
    match validation.failure() {
        Some(why) => Err(Finish::Invalid(why, Some(validation.to_validation()))),
        None => Ok((prep, validation)),
    }
}

/// The window's handle on the data file: with O_DIRECT when asked. `Err((unsupported, why))`.
fn open_data(path: &Path, spec: &Spec, dir: &Path) -> Result<File, (bool, String)> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true);
    if spec.direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    opts.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) if spec.direct => (true, format!("direct = true: the file system of dir {} does not support O_DIRECT (tmpfs?)", dir.display())),
        _ => (false, format!("opening the file: {e}")),
    })
}

/// `cache = cached`: the whole file read once through the layer into a memfd (when it fits in
/// half the memory available); `cold`: none.
fn cached(spec: &Spec, data: &File, tags: Option<&File>, prep: &mut Crypt) -> Result<Option<File>, String> {
    if spec.cache == Cache::Cold {
        return Ok(None);
    }
    if let Some(avail) = mem_available().filter(|&a| spec.file_bytes > a / 2) {
        return Err(format!(
            "cache = cached keeps the whole file ({} MiB) in memory; this host has {} MiB available: choose a smaller file_bytes",
            spec.file_bytes >> 20,
            avail >> 20
        ));
    }
    cached_copy(data, tags, prep, spec.file_bytes).map(Some).map_err(|e| format!("making the cached copy: {e}"))
}

/// The userspace layer: the backend encrypts in this process, with `key`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_userspace(
    case: &WorkloadCase,
    spec: &Spec,
    backend: &dyn Backend,
    key: &Key,
    dir: &Path,
    scratch: &mut Scratch,
    warmup: Duration,
    budget: Duration,
) -> Finish {
    let (mut prep, mut validation) = match layer_with_answers(spec, backend, key) {
        Ok(x) => x,
        Err(f) => return f,
    };
    let invalid = |why: String, v: &StorageValidation| Finish::Invalid(why, Some(v.to_validation()));
    // The file (and tags file), written in full through the layer.
    let path = data_path(dir);
    let gcm = spec.scheme == Scheme::Aes256Gcm;
    let files = scratch.create(path.clone()).and_then(|d| Ok((d, gcm.then(|| scratch.create(tags_path(&path))).transpose()?)));
    let (prep_data, prep_tags) = match files {
        Ok(f) => f,
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
    (validation.on_disk, validation.cross_decrypt, validation.cross_checks) = (on_disk, cross_decrypt, cross_checks);
    if let Some(why) = validation.failure() {
        return invalid(why, &validation);
    }
    // The window's handles: the data file with O_DIRECT when asked; tags through the cache.
    let data = match open_data(&path, spec, dir) {
        Ok(f) => f,
        Err((true, why)) => return Finish::Unsupported(why, Some(validation.to_validation())),
        Err((false, why)) => return invalid(why, &validation),
    };
    let memfd = match cached(spec, &prep_data, prep_tags.as_ref(), &mut prep) {
        Ok(m) => m,
        Err(why) => return invalid(why, &validation),
    };
    let target = Arc::new(Target { data, tags: prep_tags.as_ref().and_then(|t| t.try_clone().ok()), memfd });
    if gcm && target.tags.is_none() {
        return invalid("could not share the tags file with the load threads".into(), &validation);
    }
    let library = match spec.scheme {
        Scheme::Clear => "none".to_string(),
        _ => format!("{} {}", backend.info().library, backend.info().library_version),
    };
    let files: Vec<(&File, &str)> = std::iter::once((&prep_data, "data file")).chain(prep_tags.as_ref().map(|t| (t, "tags file"))).collect();
    measure(case, spec, backend, &key.0, target, &files, library, validation, warmup, budget)
}

/// Each load thread's buffers (an I/O buffer, and a plaintext block when it writes) fit in
/// half the memory this host has available; else one line saying what to choose.
fn buffers_fit(spec: &Spec, threads: usize) -> Result<(), String> {
    let per_thread = spec.block_bytes as u64 * if spec.direction == Direction::Read { 1 } else { 2 };
    match mem_available().filter(|&a| threads as u64 * per_thread > a / 2) {
        None => Ok(()),
        Some(avail) => Err(format!(
            "{threads} threads × {} MiB of buffers need {} MiB; this host has {} MiB available: choose a smaller block_bytes or fewer threads",
            per_thread >> 20,
            (threads as u64 * per_thread) >> 20,
            avail >> 20
        )),
    }
}

/// Load thread `i` of `threads`: its region of the file's `blocks`, its layer over `key`, its
/// buffers (its plaintext block filled when it writes).
#[allow(clippy::too_many_arguments)]
fn io_thread(i: usize, threads: usize, blocks: u64, spec: &Spec, backend: &dyn Backend, key: &[u8], target: &Arc<Target>,
             counters: &Arc<Counters>) -> Result<IoThread, BackendError> {
    let walk = Walk::region(i, threads, blocks, spec.pattern == Pattern::Random);
    let plain = (spec.direction != Direction::Read).then(|| {
        let mut p = AlignedBuf::new(spec.block_bytes);
        let first = walk.first * (spec.block_bytes / SECTOR) as u64;
        for (k, s) in p.chunks_exact_mut(SECTOR).enumerate() {
            fill_plaintext(first + k as u64, s);
        }
        p
    });
    Ok(IoThread {
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
    })
}

/// `fsync = end`: one `fdatasync` of `files` after the window, its time added to the window and
/// its CPU to the process's. Returns its time in ns.
fn fsync_at_end(files: &[(&File, &str)], lm: &mut LoadMeasurement) -> Result<u64, String> {
    let (cpu0, t0) = (sampler::process_cpu_ns(), clock::monotonic_ns());
    for (f, what) in files {
        f.sync_data().map_err(|e| format!("fdatasync of the {what} after the window: {e}"))?;
    }
    let (cpu1, t1) = (sampler::process_cpu_ns(), clock::monotonic_ns());
    lm.m.wall_ns += t1 - t0;
    lm.process_user_ns += cpu1.0.saturating_sub(cpu0.0);
    lm.process_system_ns += cpu1.1.saturating_sub(cpu0.1);
    Ok(t1 - t0)
}

/// The result's `storage`: the settings as run and what the window did.
fn storage_fields(spec: &Spec, lm: &LoadMeasurement, (reads, writes): (u64, u64), fsync_end_ns: u64, library: String) -> StorageFields {
    let block = spec.block_bytes as u64;
    StorageFields {
        scheme: spec.scheme.name().into(),
        pattern: if spec.pattern == Pattern::Random { "random" } else { "sequential" }.into(),
        direction: spec.direction.name(),
        read_pct: spec.direction.read_pct(),
        block_bytes: spec.block_bytes,
        file_bytes: spec.file_bytes,
        sector_bytes: SECTOR,
        direct: spec.direct,
        fsync: name_of(&FSYNCS, spec.fsync).into(),
        cache: name_of(&CACHES, spec.cache).into(),
        layer: name_of(&LAYERS, spec.layer).into(),
        reads,
        writes,
        bytes_read: reads * block,
        bytes_written: writes * block,
        process_user_ns: lm.process_user_ns,
        process_system_ns: lm.process_system_ns,
        fsync_end_ns,
        library,
    }
}

/// Measure the window over `target`, each load thread with its own layer; `files` are flushed
/// and dropped from the page cache before a cold window, and flushed after it for `fsync = end`.
#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
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
    let validated = validation.to_validation();
    let invalid = |why: String| Finish::Invalid(why, Some(validated.clone()));
    let threads = case.common.load.threads();
    if let Err(why) = buffers_fit(spec, threads) {
        return invalid(why);
    }
    let blocks = spec.file_bytes / spec.block_bytes as u64;
    let counters = Arc::new(Counters::default());
    let next_thread = AtomicUsize::new(0);
    let make = || -> Result<TxnFn, BackendError> {
        let i = next_thread.fetch_add(1, Ordering::Relaxed);
        let mut t = io_thread(i, threads, blocks, spec, backend, key, &target, &counters)?;
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
    let timeline = sampler::Sampler::start();
    let measured = run_load_with(make, case.common.load, warmup, budget, between);
    let measured = match measured {
        Ok(mut lm) if spec.fsync == Fsync::End => fsync_at_end(files, &mut lm).map(|ns| (lm, ns)).map_err(invalid),
        Ok(lm) => Ok((lm, 0)),
        Err(BackendError::Unsupported(r)) => Err(Finish::Unsupported(r, Some(validated.clone()))),
        Err(BackendError::Failed(e)) => Err(invalid(format!("I/O failed while measured: {e}"))),
    };
    let samples = timeline.stop();
    let (lm, fsync_end_ns) = match measured {
        Ok(m) => m,
        Err(f) => return f,
    };
    let (reads, writes) = (counters.reads.load(Ordering::Relaxed), counters.writes.load(Ordering::Relaxed));
    if reads + writes != lm.m.ops {
        return invalid(format!("the window timed {} I/Os but counted {reads} reads and {writes} writes", lm.m.ops));
    }
    let storage = storage_fields(spec, &lm, (reads, writes), fsync_end_ns, library);
    Finish::Ok(Outcome {
        measured: Measured::of_load(&lm, spec.block_bytes),
        validation: Some(validated),
        detail: WorkloadDetail::Storage(StorageResult { client_timeline: samples, storage }),
    })
}
