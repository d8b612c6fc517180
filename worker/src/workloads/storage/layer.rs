//! The sector layer (each sector encrypted or decrypted through the measured backend), the
//! per-request keys and buffers, and the files: created, prepared, dropped from the cache.

use crate::backends::{Aead, Backend, BackendError, SectorCipher};
use crate::ops::AeadAlg;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use super::spec::*;

/// A key from the OS random generator, zeroed when dropped; never written anywhere.
pub(super) struct Key(pub(super) Vec<u8>);

impl Key {
    /// `len` random bytes; for XTS, halves that differ.
    pub(super) fn random(len: usize) -> Result<Key, String> {
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
pub(super) enum Crypt {
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
    pub(super) fn new(backend: &dyn Backend, scheme: Scheme, key: &[u8], id: u32) -> Result<Crypt, BackendError> {
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
    pub(super) fn encrypt(&mut self, first: u64, buf: &mut [u8], tags: &mut [u8]) -> Result<(), BackendError> {
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
    pub(super) fn decrypt(&mut self, first: u64, buf: &mut [u8], tags: &[u8]) -> Result<(), BackendError> {
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
pub(super) fn fill_plaintext(sector: u64, out: &mut [u8]) {
    let mut rng = Prng(sector ^ 0x5354_4f52_4147_4521);
    for w in out.chunks_exact_mut(8) {
        w.copy_from_slice(&rng.next().to_le_bytes());
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): small, fast, enough for choosing blocks.
pub(super) struct Prng(pub(super) u64);

impl Prng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (multiply-shift; the bias is below 2^-40 for the sizes here).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// A zeroed buffer aligned to a sector, as O_DIRECT needs.
pub(super) struct AlignedBuf {
    pub(super) ptr: std::ptr::NonNull<u8>,
    pub(super) len: usize,
}

// SAFETY: the buffer is plain owned memory; only its owner touches it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub(super) fn new(len: usize) -> AlignedBuf {
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
pub(super) struct Scratch(Vec<PathBuf>);

impl Scratch {
    /// Create `path` (it must not exist), owner-only, and remember it for removal.
    pub(super) fn create(&mut self, path: PathBuf) -> Result<File, String> {
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
pub(super) fn data_path(dir: &Path) -> PathBuf {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    dir.join(format!("storage-{}-{}.data", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)))
}

/// The path of a data file's GCM tags file.
pub(super) fn tags_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(".tags");
    PathBuf::from(s)
}

/// What the timed I/O goes to; shared by the load threads (positional I/O only).
pub(super) struct Target {
    /// The data file or device, with O_DIRECT when asked.
    pub(super) data: File,
    /// GCM: the tags file (always through the page cache).
    pub(super) tags: Option<File>,
    /// `cache = cached`: the decrypted copy the reads come from.
    pub(super) memfd: Option<File>,
}

/// Where the sectors sit below the layer, for the on-disk checks: a file, the byte offset of
/// sector 0 in it, and the tweaks sector k may have been encrypted with (`k × m` for each m).
pub(super) struct Raw {
    pub(super) path: PathBuf,
    pub(super) offset: u64,
    pub(super) tweak_units: Vec<u64>,
}

pub(super) fn io_err(what: &str, e: std::io::Error) -> BackendError {
    BackendError::Failed(format!("{what}: {e}"))
}

/// `fdatasync`, then drop the file's pages from the page cache.
pub(super) fn drop_cached(f: &File, what: &str) -> Result<(), BackendError> {
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
pub(super) fn prepare(data: &File, tags: Option<&File>, crypt: &mut Crypt, file_bytes: u64) -> Result<(), String> {
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
pub(super) fn cached_copy(data: &File, tags: Option<&File>, crypt: &mut Crypt, file_bytes: u64) -> Result<File, String> {
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
pub(super) fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
