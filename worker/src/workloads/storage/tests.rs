//! `storage`'s tests.

use super::checks::*;
use super::dmcrypt::*;
use super::layer::*;
use super::measure::*;
use super::*;
use crate::backends::{self, Backend, BackendError, SectorCipher, XtsBits};
use crate::ops::AeadAlg;
use crate::workloads::base::{Mode, WorkloadCase};
use serde_json::{json, Map, Value};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use crate::backends::conformance::{subjects, supports, Cap};
use crate::workloads::base::{self, parse_with};

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

/// A run's answer as the protocol sends it (its `result` as JSON), by status.
enum Finish {
    Ok(Value),
    Unsupported(String),
    Invalid(String, Value),
}

fn answer(c: &WorkloadCase, f: super::Finish) -> Finish {
    let v = c.answer_json(f);
    let reason = v["reason"].as_str().unwrap_or("").to_string();
    match v["status"].as_str() {
        Some("ok") => Finish::Ok(v),
        Some("unsupported") => Finish::Unsupported(reason),
        _ => Finish::Invalid(reason, v),
    }
}

fn params(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

/// Parse a storage request with small defaults (256 KiB file, 16 KiB blocks) under `p`.
fn case(backend: &str, dir: &TempDir, p: Value) -> WorkloadCase {
    let mut m = params(json!({"dir": dir.path(), "file_bytes": 262144, "block_bytes": 16384}));
    m.extend(params(p));
    parse_with(&Storage, backend, &m).unwrap_or_else(|e| panic!("{e}"))
}

/// Run a request for 50 ms after 10 ms of warm-up; the result's fields, or the reason.
/// (One run at a time, and never beside a test that times CPU use.)
fn run_on(b: &dyn Backend, dir: &TempDir, p: Value) -> Finish {
    let c = case(b.info().backend, dir, p);
    let _cpu = crate::measure::cpu_test_lock();
    answer(&c, base::run(&c, b, Duration::from_millis(10), Duration::from_millis(50)))
}

fn ok(f: Finish, what: &str) -> Value {
    match f {
        Finish::Ok(v) => v,
        Finish::Unsupported(r) => panic!("{what}: unsupported: {r}"),
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
                    Finish::Unsupported(why) => {
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
        let spec: &Spec = c.request().unwrap();
        assert_eq!(check(spec, &*b).unwrap_err(), want);
        match run_on(&*b, &dir, json!({"scheme": scheme.name()})) {
            Finish::Unsupported(why) => assert_eq!(why, want),
            _ => panic!("{name} {}: not unsupported", scheme.name()),
        }
        assert!(dir.files().is_empty());
    }
    // And what they have, check accepts without writing anything.
    let dir = TempDir::new("check");
    for (name, scheme) in [("ring", Scheme::Aes256Gcm), ("aws-lc", Scheme::Aes256Xts), ("openssl", Scheme::Aes128Xts), ("rustcrypto", Scheme::Clear)] {
        let c = case(name, &dir, json!({"scheme": scheme.name()}));
        let spec: &Spec = c.request().unwrap();
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
        match answer(&c, base::run(&c, &broken, Duration::ZERO, Duration::from_millis(20))) {
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
            assert_eq!((checks.len(), checks[0].status.as_str()), (1, "pass"));
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
        let e = parse_with(&Storage, "openssl", &params(p.clone())).err().unwrap_or_else(|| panic!("{p}: accepted"));
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
        let e = parse_with(&Storage, "openssl", &params(json!({"dir": d}))).err().unwrap();
        assert!(e.contains("is not writable"), "{e}");
    }
    std::fs::set_permissions(&ro.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Booleans and numbers as JSON or as text; the defaults.
    for (direct, want) in [(json!(true), true), (json!("TRUE"), true), (json!("false"), false)] {
        let c = parse_with(&Storage, "openssl", &params(json!({"direct": direct}))).unwrap();
        let s: &Spec = c.request().unwrap();
        assert_eq!(s.direct, want);
    }
    let c = parse_with(&Storage, "openssl", &Map::new()).unwrap();
    let s: &Spec = c.request().unwrap();
    assert_eq!((s.scheme, s.pattern, s.direction), (Scheme::Clear, Pattern::Sequential, Direction::Read));
    assert_eq!((s.block_bytes, s.file_bytes, s.direct), (65536, 64 << 20, false));
    assert_eq!((s.fsync, s.cache, s.layer, &s.dir), (Fsync::None, Cache::Cold, Layer::Userspace, &None));
    assert_eq!(c.common.mode, Mode::File);
    assert_eq!(base::ready_to_run(&c).unwrap_err().lines().count(), 1);
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
        Finish::Unsupported(why) => assert!(why.contains("does not support O_DIRECT"), "{why}"),
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
        let spec: &Spec = c.request().unwrap();
        let checked = check(spec, &*b);
        if no_dm {
            let want = "dm-crypt layer unavailable: this kernel has no device-mapper (/dev/mapper/control missing)";
            assert_eq!(dm_crypt_unavailable().as_deref(), Some(want));
            assert_eq!(checked, Err(want.to_string()));
            match answer(&c, base::run(&c, &*b, Duration::ZERO, Duration::from_millis(20))) {
                Finish::Unsupported(why) => assert_eq!(why, want),
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

