//! The dm-crypt layer: the same I/O on a LUKS2 volume over a loop device, where the host
//! allows it.

use crate::workloads::base::{Finish, Outcome, WorkloadCase};
use crate::backends::{self, Backend};
use crate::result::WorkloadDetail;
use crate::measure::clock;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use super::checks::*;
use super::layer::*;
use super::measure::*;
use super::spec::*;
use std::io::Write;
use std::process::{Command, Stdio};

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
pub(super) fn on_path(tool: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false))
}

/// The dm-crypt layer: a loop device over a file in `dir`, with a LUKS2 volume on it for the XTS
/// schemes. Not exercised where this was written (no device-mapper there): kept to plain steps,
/// each checked, and torn down by [`Volume`]'s `Drop` whatever happens.

/// The loop device and the opened mapping, closed and detached when dropped.
#[derive(Default)]
pub(super) struct Volume {
    pub(super) loop_dev: Option<String>,
    pub(super) mapping: Option<String>,
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
pub(super) fn tool(name: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<String, String> {
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
pub(super) fn key_memfd(bytes: &[u8]) -> Result<(File, String), String> {
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

/// Set up the volume with `key`, then prepare, validate and measure as in userspace, on the
/// device.
pub(super) fn run(case: &WorkloadCase, spec: &Spec, key: &Key, dir: &Path, scratch: &mut Scratch, warmup: Duration, budget: Duration) -> Finish {
    let mut volume = Volume::default();
    let finish = run_on(case, spec, key, dir, scratch, &mut volume, warmup, budget);
    drop(volume);
    finish
}

/// The backing file in `dir` (`offset` + `file_bytes` long) attached to a loop device of
/// 4096-byte sectors: the backing file's path (the volume records the device).
fn attach(volume: &mut Volume, spec: &Spec, dir: &Path, scratch: &mut Scratch, offset: u64) -> Result<PathBuf, String> {
    let backing = data_path(dir).with_extension("img");
    let img = scratch.create(backing.clone())?;
    img.set_len(offset + spec.file_bytes).map_err(|e| format!("sizing {}: {e}", backing.display()))?;
    drop(img);
    let backing_s = backing.to_string_lossy().to_string();
    match tool("losetup", &["--find", "--show", "--sector-size", "4096", &backing_s], None)? {
        dev if dev.starts_with("/dev/") => volume.loop_dev = Some(dev),
        other => return Err(format!("losetup printed '{other}' instead of a device")),
    }
    Ok(backing)
}

/// A LUKS2 volume (aes-xts-plain64 with `key`, the XTS key of the scheme's size, 4096-byte sectors) made on `loop_dev` and opened
/// (the volume records the mapping): the mapped device's path. The key reaches cryptsetup
/// through a memfd, never a file.
fn open_luks(volume: &mut Volume, loop_dev: &str, key: &Key) -> Result<String, String> {
    let passphrase = hex::encode(&Key::random(32)?.0);
    let (memfd, key_path) = key_memfd(&key.0)?;
    // cryptsetup ≥ 2.7 names the option --volume-key-file; older ones --master-key-file.
    let help = tool("cryptsetup", &["--help"], None).unwrap_or_default();
    let key_opt = if help.contains("--volume-key-file") { "--volume-key-file" } else { "--master-key-file" };
    let key_bits = (key.0.len() * 8).to_string();
    let format = [
        "luksFormat", "--batch-mode", "--type", "luks2", "--cipher", "aes-xts-plain64", "--key-size", &key_bits,
        "--sector-size", "4096", "--offset", "32768", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
        key_opt, &key_path, "--key-file", "-", loop_dev,
    ];
    let formatted = tool("cryptsetup", &format, Some(passphrase.as_bytes()));
    drop(memfd);
    formatted?;
    let name = format!("cryptoperf-{}-{}", std::process::id(), clock::monotonic_ns());
    tool("cryptsetup", &["open", "--type", "luks2", "--key-file", "-", loop_dev, &name], Some(passphrase.as_bytes()))?;
    volume.mapping = Some(name.clone());
    Ok(format!("/dev/mapper/{name}"))
}

/// Open `device` for reading and writing, with O_DIRECT when `direct`.
fn open_device(device: &str, direct: bool) -> Result<File, String> {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(device).map_err(|e| format!("opening {device}: {e}"))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_on(
    case: &WorkloadCase,
    spec: &Spec,
    key: &Key,
    dir: &Path,
    scratch: &mut Scratch,
    volume: &mut Volume,
    warmup: Duration,
    budget: Duration,
) -> Finish {
    let kat = match spec.scheme {
        Scheme::Clear => "not applicable (clear: nothing is encrypted)",
        _ => "not applicable (the kernel's dm-crypt encrypts; the kernel tests its AES-XTS when it registers it)",
    };
    let mut validation =
        StorageValidation { kat: kat.into(), kat_source: String::new(), on_disk: "not run".into(), cross_decrypt: "not run".into(), cross_checks: vec![] };
    let invalid = |why: String, v: &StorageValidation| Finish::Invalid(why, Some(v.to_validation()));
    let offset = if spec.scheme == Scheme::Clear { 0 } else { LUKS_DATA_OFFSET };
    let device = attach(volume, spec, dir, scratch, offset).and_then(|backing| {
        let loop_dev = volume.loop_dev.clone().unwrap_or_default();
        let device = match spec.scheme.xts() {
            Some(_) => open_luks(volume, &loop_dev, key)?,
            None => loop_dev,
        };
        Ok((backing, device))
    });
    let (backing, device) = match device {
        Ok(d) => d,
        Err(e) => return invalid(e, &validation),
    };
    let prep_dev = match open_device(&device, false) {
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
    (validation.on_disk, validation.cross_decrypt, validation.cross_checks) = (on_disk, cross_decrypt, cross_checks);
    if let Some(why) = validation.failure() {
        return invalid(why, &validation);
    }
    let data = match open_device(&device, spec.direct) {
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
    let library = match spec.scheme {
        Scheme::Clear => "none".to_string(),
        _ => format!("Linux {} dm-crypt (aes-xts-plain64)", std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim()),
    };
    let target = Arc::new(Target { data, tags: None, memfd });
    // The kernel encrypts, so every thread's layer here is clear.
    let spec_clear = Spec { scheme: Scheme::Clear, ..spec.clone() };
    let mut finish = measure(case, &spec_clear, &ClearBackend, &[], target, &[(&prep_dev, "volume")], library, validation, warmup, budget);
    if let Finish::Ok(Outcome { detail: WorkloadDetail::Storage(r), .. }) = &mut finish {
        r.storage.scheme = spec.scheme.name().into();
    }
    finish
}

/// A backend with nothing: the load threads' layer when the kernel encrypts (dm-crypt), where
/// only `Crypt::Clear` is made.
pub(super) struct ClearBackend;

impl Backend for ClearBackend {
    fn info(&self) -> backends::LibraryInfo {
        backends::LibraryInfo { backend: "none", library: "none".into(), library_version: String::new(), fips: false, fips_provider: None }
    }
}
