//! The checks before timing: the scheme's known answers, and the sectors read raw from below
//! the layer and decrypted by another library.

use crate::backends::{self, failed, Backend, BackendError};
use crate::kat;
use crate::result::{CrossCheck, Validation};
use crate::ops::{AeadAlg, Op, RawParams};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use super::layer::*;
use super::spec::*;

/// The outcome of the checks before timing (the result's `validation`).
#[derive(Debug, Clone)]
pub(super) struct StorageValidation {
    /// `pass`, `fail: <why>` or `not applicable (<why>)`.
    pub(super) kat: String,
    pub(super) kat_source: String,
    /// Whether the sectors on disk hold what they must (ciphertext unlike the plaintext, or for
    /// `clear` the plaintext): `pass: …`, `fail: …`.
    pub(super) on_disk: String,
    /// The raw sectors decrypted by another library: `pass: <library> …`, `fail: …`, or
    /// `not applicable (clear)`.
    pub(super) cross_decrypt: String,
    /// The cross-decryption as the primitives report theirs.
    pub(super) cross_checks: Vec<CrossCheck>,
}

impl StorageValidation {
    pub(super) fn failure(&self) -> Option<String> {
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

    /// As the result's `validation`.
    pub(super) fn to_validation(&self) -> Validation {
        Validation {
            kat: self.kat.clone(),
            kat_source: Some(self.kat_source.clone()),
            on_disk: Some(self.on_disk.clone()),
            cross_decrypt: Some(self.cross_decrypt.clone()),
            cross_checks: Some(self.cross_checks.clone()),
            ..Validation::default()
        }
    }
}

/// The known-answer test of the scheme on `backend`: `(kat, source)`.
pub(super) fn known_answer(backend: &dyn Backend, scheme: Scheme) -> Result<(String, String), BackendError> {
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
        let params = crate::ops::Params::resolve(op, &RawParams::default()).map_err(failed)?;
        let v = kat::validate_against(backend, op, &params, &[])?;
        if !matches!(v.kat, kat::KatStatus::Pass) {
            kats.push(v.kat.to_string());
        }
        source = v.kat_source;
    }
    Ok((if kats.is_empty() { "pass".into() } else { kats.join("; ") }, source))
}

/// The library that checks `measured`'s output: RustCrypto, or OpenSSL when RustCrypto is the
/// one measured. Called directly, so also in the FIPS build.
pub(super) fn checker_for(measured: &str) -> Box<dyn Backend> {
    if measured == "rustcrypto" {
        Box::new(backends::openssl::OpenSsl)
    } else {
        Box::new(backends::rustcrypto::RustCrypto)
    }
}

/// How `checker` is named in the validation: the library and the parts of it that decrypted.
pub(super) fn checker_label(checker: &dyn Backend, scheme: Scheme) -> String {
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
pub(super) fn on_disk_checks(
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
    let lib_name = checker_label(checker, scheme);
    let mut on_disk = Ok(());
    let mut cross = Ok(());
    for &sector in &sectors {
        let (ct, slot) = match read_raw(raw, tags, sector) {
            Ok(x) => x,
            Err(e) => {
                let e = format!("fail: {e}");
                return (e.clone(), e, vec![]);
            }
        };
        let mut pt = vec![0u8; SECTOR];
        fill_plaintext(sector, &mut pt);
        let (problem, encrypted) = sector_on_disk(scheme, sector, &ct, &slot, &pt, crypt);
        if let Some(why) = problem {
            on_disk = on_disk.and(Err(why));
        }
        if encrypted {
            let decrypted = decrypt_raw(checker, scheme, key, raw, sector, &ct, &slot, &pt);
            cross = cross.and_then(|_| match decrypted {
                Ok(d) if d == pt => Ok(()),
                Ok(_) => Err(format!("{lib_name} decrypted sector {sector} to other bytes than the plaintext written")),
                Err(e) => Err(format!("{lib_name} could not decrypt sector {sector}: {e}")),
            });
        }
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
        Ok(()) => {
            let d = format!("{lib_name} decrypted sectors {which}, read raw from the file, to the plaintext written (same key and {what})");
            (format!("pass: {d}"), "pass", d)
        }
        Err(why) => (format!("fail: {why}"), "fail", why),
    };
    let check = CrossCheck { with: checker.info().backend.to_string(), status: status.into(), detail: format!("storage: {detail}") };
    (on_disk, cross_decrypt, vec![check])
}

/// Sector `sector` read raw from below the layer, and its 32-byte tag slot (GCM; zeros else).
fn read_raw(raw: &Raw, tags: Option<&Path>, sector: u64) -> Result<(Vec<u8>, Vec<u8>), String> {
    let f = File::open(&raw.path).map_err(|e| format!("opening {}: {e}", raw.path.display()))?;
    let mut ct = vec![0u8; SECTOR];
    f.read_exact_at(&mut ct, raw.offset + sector * SECTOR as u64).map_err(|e| format!("reading sector {sector}: {e}"))?;
    let mut slot = vec![0u8; TAG_SLOT];
    if let Some(t) = tags {
        let t = File::open(t).map_err(|e| format!("opening the tags file: {e}"))?;
        t.read_exact_at(&mut slot, sector * TAG_SLOT as u64).map_err(|e| format!("reading sector {sector}'s tag: {e}"))?;
    }
    Ok((ct, slot))
}

/// What sector `sector` on disk (`ct`, its tag `slot`) must be against its plaintext `pt`: for
/// clear the plaintext; else not the plaintext, and for GCM a well-formed slot and a flipped
/// ciphertext bit that does not authenticate with the measured `crypt`. Returns the problem, if
/// any, and whether the sector is encrypted data for another library to decrypt.
fn sector_on_disk(scheme: Scheme, sector: u64, ct: &[u8], slot: &[u8], pt: &[u8], crypt: &mut Crypt) -> (Option<String>, bool) {
    if scheme == Scheme::Clear {
        return ((ct != pt).then(|| format!("sector {sector} on disk is not the plaintext written")), false);
    }
    if ct == pt {
        return (Some(format!("sector {sector} on disk is the plaintext: nothing was encrypted")), false);
    }
    if scheme == Scheme::Aes256Gcm {
        if slot[..28].iter().all(|&b| b == 0) || slot[28..].iter().any(|&b| b != 0) {
            return (Some(format!("sector {sector}'s tag slot is not nonce ‖ tag ‖ 4 zero bytes")), false);
        }
        // A flipped ciphertext bit must not authenticate with the measured library.
        let mut tampered = ct.to_vec();
        tampered[100] ^= 0x04;
        if crypt.decrypt(sector, &mut tampered, slot).is_ok() {
            return (Some(format!("sector {sector} with a flipped ciphertext bit authenticated")), true);
        }
    }
    (None, true)
}

/// Sector `sector` (`ct`, its tag `slot`) decrypted by `checker` with the same key (XTS: each
/// of the raw layout's tweak units until one gives `pt`; GCM: nonce, tag and AAD).
#[allow(clippy::too_many_arguments)]
fn decrypt_raw(checker: &dyn Backend, scheme: Scheme, key: &[u8], raw: &Raw, sector: u64, ct: &[u8], slot: &[u8], pt: &[u8]) -> Result<Vec<u8>, BackendError> {
    match scheme.xts() {
        Some(bits) => {
            let mut x = checker.xts(bits, key)?;
            let mut last_try = Vec::new();
            for &unit in &raw.tweak_units {
                let mut buf = ct.to_vec();
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
            let mut sealed = ct.to_vec();
            sealed.extend_from_slice(&slot[12..28]);
            let mut out = Vec::new();
            a.open(&nonce, &sector.to_le_bytes(), &sealed, &mut out)?;
            Ok(out)
        }
    }
}
