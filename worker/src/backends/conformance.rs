//! The backend conformance suite: one set of checks, written against the [`Backend`] trait and
//! run on every real backend (`openssl`, `aws-lc`, `ring`, `rustcrypto`), in place of a copy
//! per backend file.
//!
//! For every backend and every algorithm it has, the suite checks
//!
//! - **known answers**: FIPS 180-4 / FIPS 202 "abc" digests, RFC 2202 / RFC 4231 HMAC, the GCM
//!   specification's and RFC 8439's AEAD vectors, RFC 8032 §7.1 TEST 1 (Ed25519), RFC 7748 §6.1
//!   (X25519), NIST CAVP ECC CDH (P-256), RFC 6979 A.2.5/A.2.6 and the computed signatures of
//!   `kat/vectors` (RSA, ECDSA), the NIST ACVP ML-KEM and ML-DSA test cases of `kat/vectors`;
//! - **round trips**: seal → open, sign → verify, encapsulate → decapsulate, both sides of a
//!   key agreement derive the same secret, with the primitive reused across calls (the timed
//!   loop reuses it) and after a failed call;
//! - **tamper rejection**: a flipped ciphertext, tag, nonce, AAD, signature or message bit, a
//!   truncated input, a wrong key length or a key of the wrong size/curve is refused; ML-KEM
//!   rejects implicitly (FIPS 203 §6.3: another secret, no error);
//! - **interoperation** with every other backend that has the algorithm, both ways: signed by
//!   one and verified by the other, sealed by one and opened by the other (byte-identical
//!   ciphertexts, as AES-GCM and ChaCha20-Poly1305 are deterministic for a key and nonce;
//!   byte-identical signatures for the deterministic schemes, RSA PKCS#1 v1.5 and Ed25519),
//!   encapsulated by one and decapsulated by the other, key agreement across the two.
//!
//! The Wycheproof vectors (C2SP/wycheproof) run through the same machinery in
//! `crate::kat::wycheproof`.
//!
//! **What a backend has** is written down in [`supports`]: a backend that says "unsupported"
//! for something the table says it has, or has something the table says it lacks, fails the
//! suite, so "unsupported" is a skip only where the library truly lacks the algorithm. Every
//! test also counts the (backend, case) pairs it actually checked and requires a minimum per
//! backend, so a suite that ran nothing cannot pass; and `suite_functions_fail_on_broken_backends`
//! runs every suite function on deliberately wrong backends and requires each to fail.
//!
//! In the FIPS build (`--features fips`), the backends checked are those that run in FIPS
//! mode there (`crate::fips::unavailable`): the AWS-LC FIPS module (and OpenSSL where the
//! host has its FIPS provider). The other libraries still serve as interoperation partners.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use super::{by_name, Aead, Backend, BackendError, KemDecapsulator, Result, XtsBits, NAMES};
use crate::kat::{self, same, unhex, vectors};
use crate::ops::keys::{self, KeyPair};
use crate::ops::{AeadAlg, DigestAlg, KemAlg, KxAlg, MlDsaLevel, RsaPadding, SigAlg, SigFamily, FFDH2048_PRIVATE_BITS};

// ---- what each backend has ------------------------------------------------------------------

/// One capability a backend may have, as the suite asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cap {
    Digest(DigestAlg),
    Hmac(DigestAlg),
    Aead(AeadAlg),
    Sign(SigAlg),
    Verify(SigAlg),
    /// `agreement(alg, Some(key))` (FFDH: `None`, the backend generates the key pair).
    Agree(KxAlg),
    /// `agreement(X25519, None)`: a generated, reusable X25519 key pair.
    GenerateX25519,
    /// `agreement(EcdhP256, None)`: a generated, reusable P-256 key pair (an ephemeral share).
    GenerateP256,
    /// `key_share(alg)`: a fresh single-use key pair (what `-keygen` times).
    KeyShare(KxAlg),
    /// `kem_keypair` and `kem_encapsulator`.
    Kem(KemAlg),
    /// `kem_decapsulator`: import a FIPS 203 decapsulation key.
    KemImport(KemAlg),
    /// `kem_keypair_from_seed`: ML-KEM.KeyGen_internal(d, z).
    KemSeeded(KemAlg),
    /// `encaps_with`: ML-KEM.Encaps_internal(ek, m).
    KemEncapsWithM(KemAlg),
    /// `sig_keygen(alg, None)`.
    SigKeygen(MlDsaLevel),
    /// `sig_keygen(alg, Some(seed))`: ML-DSA.KeyGen_internal(ξ).
    SigKeygenSeeded(MlDsaLevel),
    /// `xts(bits, key)`: XTS-AES sector encryption.
    Xts(XtsBits),
}

/// Whether the real backend `name` has `cap`, from its library's documentation (each backend
/// file's module doc lists what it lacks and why). `None` for a backend outside [`NAMES`] (the
/// suite's test doubles), which has no expectations.
pub(crate) fn supports(name: &str, cap: Cap) -> Option<bool> {
    use DigestAlg::*;
    let sha2 = |d: DigestAlg| matches!(d, Sha256 | Sha384 | Sha512);
    let is_ml_kem = |k: KemAlg| k != KemAlg::X25519MlKem768;
    Some(match name {
        // OpenSSL 3: everything but the post-quantum algorithms (from 3.5 on; this backend
        // keeps to what 3.0 has).
        "openssl" => match cap {
            Cap::Digest(_) | Cap::Hmac(_) | Cap::Aead(_) => true,
            Cap::Sign(alg) | Cap::Verify(alg) => !matches!(alg, SigAlg::MlDsa(_)),
            Cap::Agree(_) | Cap::GenerateX25519 | Cap::GenerateP256 | Cap::KeyShare(_) => true,
            Cap::Kem(_) | Cap::KemImport(_) | Cap::KemSeeded(_) | Cap::KemEncapsWithM(_) => false,
            Cap::SigKeygen(_) | Cap::SigKeygenSeeded(_) => false,
            Cap::Xts(_) => true,
        },
        // aws-lc-rs (plus AWS-LC's C API for RSA with SHA-1 and for FFDH): no SHA-3 HMAC or
        // RSA, ECDSA signing only P-256/SHA-256 and P-384/SHA-384, no seeded ML-KEM.
        "aws-lc" => match cap {
            Cap::Digest(_) | Cap::Aead(_) => true,
            Cap::Hmac(d) => d != Sha3_256,
            Cap::Sign(SigAlg::Rsa { digest, .. }) | Cap::Verify(SigAlg::Rsa { digest, .. }) => {
                digest != Sha3_256
            }
            Cap::Sign(SigAlg::EcdsaP256 { digest }) => digest == Sha256,
            Cap::Sign(SigAlg::EcdsaP384 { digest }) => digest == Sha384,
            Cap::Verify(SigAlg::EcdsaP256 { digest }) => digest != Sha3_256,
            Cap::Verify(SigAlg::EcdsaP384 { digest }) => sha2(digest),
            Cap::Sign(_) | Cap::Verify(_) => true, // Ed25519, ML-DSA
            Cap::Agree(_) | Cap::KeyShare(_) => true,
            Cap::GenerateX25519 | Cap::GenerateP256 | Cap::Kem(_) => true,
            Cap::KemImport(k) => is_ml_kem(k),
            Cap::KemSeeded(_) | Cap::KemEncapsWithM(_) => false,
            Cap::SigKeygen(_) | Cap::SigKeygenSeeded(_) => true,
            // AWS-LC's only XTS cipher is EVP_aes_256_xts.
            Cap::Xts(bits) => bits == XtsBits::Aes256,
        },
        // ring: no SHA-3, no SHA-1 RSA signing (SHA-1 PKCS#1 verification only), ECDSA signing
        // only P-256/SHA-256 and P-384/SHA-384 and verification with SHA-256/384, only
        // ephemeral key agreement (so key shares, no fixed-key derive), no post-quantum
        // algorithms.
        "ring" => match cap {
            Cap::Digest(d) | Cap::Hmac(d) => d != Sha3_256,
            Cap::Aead(_) => true,
            Cap::Sign(SigAlg::Rsa { digest, .. }) => sha2(digest),
            Cap::Verify(SigAlg::Rsa { digest, padding, .. }) => {
                sha2(digest) || (digest == Sha1 && padding == RsaPadding::Pkcs1)
            }
            Cap::Sign(SigAlg::EcdsaP256 { digest }) => digest == Sha256,
            Cap::Sign(SigAlg::EcdsaP384 { digest }) => digest == Sha384,
            Cap::Verify(SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest }) => {
                matches!(digest, Sha256 | Sha384)
            }
            Cap::Sign(SigAlg::Ed25519) | Cap::Verify(SigAlg::Ed25519) => true,
            Cap::Sign(SigAlg::MlDsa(_)) | Cap::Verify(SigAlg::MlDsa(_)) => false,
            Cap::Agree(_) | Cap::GenerateX25519 | Cap::GenerateP256 => false,
            Cap::KeyShare(alg) => alg != KxAlg::Ffdh2048,
            Cap::Kem(_) | Cap::KemImport(_) | Cap::KemSeeded(_) | Cap::KemEncapsWithM(_) => false,
            Cap::SigKeygen(_) | Cap::SigKeygenSeeded(_) => false,
            Cap::Xts(_) => false,
        },
        // RustCrypto: everything but FFDH, and ECDSA P-384 with SHA-1 (`ecdsa` refuses a
        // prehash shorter than half the field size).
        "rustcrypto" => match cap {
            Cap::Sign(SigAlg::EcdsaP384 { digest }) | Cap::Verify(SigAlg::EcdsaP384 { digest }) => {
                digest != Sha1
            }
            Cap::Agree(alg) | Cap::KeyShare(alg) => alg != KxAlg::Ffdh2048,
            Cap::KemImport(k) | Cap::KemSeeded(k) | Cap::KemEncapsWithM(k) => is_ml_kem(k),
            _ => true,
        },
        _ => return None,
    })
}

// ---- which backends, and the ledger of what was checked ---------------------------------------

/// The backends whose conformance is asserted in this build: every real backend, except in the
/// FIPS build those that do not run in FIPS mode there ([`crate::fips::unavailable`]).
pub(crate) fn subjects() -> Vec<Box<dyn Backend>> {
    NAMES
        .iter()
        .filter(|n| crate::fips::unavailable(n).is_none())
        .filter_map(|n| by_name(n))
        .collect()
}

/// Every real backend: the interoperation partners (in the FIPS build too, as references).
pub(crate) fn partners() -> Vec<Box<dyn Backend>> {
    NAMES.iter().filter_map(|n| by_name(n)).collect()
}

fn refs(v: &[Box<dyn Backend>]) -> Vec<&dyn Backend> {
    v.iter().map(|b| &**b).collect()
}

fn name(b: &dyn Backend) -> &'static str {
    b.info().backend
}

/// What one suite function checked, skipped and found wrong.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Checks passed or failed, per backend (an interoperation check counts for both sides).
    pub checked: BTreeMap<String, usize>,
    /// Interoperation pairs (first → second) checked at least once.
    pub pairs: BTreeSet<(String, String)>,
    /// Interoperation checks made (one per pair, direction and algorithm).
    pub pair_checks: usize,
    /// (backend, what) skipped, with the reason.
    pub skipped: Vec<(String, String, String)>,
    pub failures: Vec<String>,
}

impl Ledger {
    /// A backend's answer to "give me `cap`": `Some` when it has it; `None`, recorded as a
    /// skip, when it says "unsupported" and the table agrees. Anything else is a failure: an
    /// error, "unsupported" for what the table says it has, or success for what it lacks.
    pub fn have<T>(&mut self, b: &dyn Backend, cap: Cap, r: Result<T>) -> Option<T> {
        let who = name(b);
        match (r, supports(who, cap)) {
            (Ok(t), Some(true) | None) => Some(t),
            (Ok(_), Some(false)) => {
                self.fail(who, format!("{cap:?}: works, but the support table says {who} lacks it"));
                None
            }
            (Err(BackendError::Unsupported(why)), Some(false) | None) => {
                self.skipped.push((who.into(), format!("{cap:?}"), why));
                None
            }
            (Err(BackendError::Unsupported(why)), Some(true)) => {
                self.fail(who, format!("{cap:?}: says unsupported ({why}), but {who} has it"));
                None
            }
            (Err(BackendError::Failed(e)), _) => {
                self.fail(who, format!("{cap:?}: failed to prepare: {e}"));
                None
            }
        }
    }

    /// Record one check of `who`: passed when `outcome` is `Ok`.
    pub fn check(&mut self, who: &str, what: impl Display, outcome: std::result::Result<(), String>) {
        *self.checked.entry(who.into()).or_default() += 1;
        if let Err(why) = outcome {
            self.failures.push(format!("{who}: {what}: {why}"));
        }
    }

    /// Record one interoperation check between `a` and `b` (in that direction).
    pub fn check_pair(&mut self, a: &str, b: &str, what: impl Display, outcome: std::result::Result<(), String>) {
        *self.checked.entry(a.into()).or_default() += 1;
        *self.checked.entry(b.into()).or_default() += 1;
        self.pairs.insert((a.into(), b.into()));
        self.pair_checks += 1;
        if let Err(why) = outcome {
            self.failures.push(format!("{a} → {b}: {what}: {why}"));
        }
    }

    pub fn skip(&mut self, who: &str, what: impl Display, why: impl Display) {
        self.skipped.push((who.into(), what.to_string(), why.to_string()));
    }

    pub fn fail(&mut self, who: &str, why: impl Display) {
        *self.checked.entry(who.into()).or_default() += 1;
        self.failures.push(format!("{who}: {why}"));
    }

    pub fn checked_by(&self, who: &str) -> usize {
        self.checked.get(who).copied().unwrap_or(0)
    }

    /// Panic unless nothing failed and every backend in `subjects` was checked at least
    /// `min(name)` times.
    pub fn assert_clean(&self, test: &str, subjects: &[&dyn Backend], min: impl Fn(&str) -> usize) {
        assert!(
            self.failures.is_empty(),
            "{test}: {} check(s) failed:\n  {}",
            self.failures.len(),
            self.failures.join("\n  ")
        );
        for b in subjects {
            let (who, want) = (name(*b), min(name(*b)));
            assert!(
                self.checked_by(who) >= want,
                "{test}: {who} was checked {} times, expected at least {want} (skipped: {:?})",
                self.checked_by(who),
                self.skipped.iter().filter(|s| s.0 == who).collect::<Vec<_>>()
            );
        }
    }
}


fn ensure(cond: bool, why: impl Display) -> std::result::Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(why.to_string())
    }
}

/// Flip the lowest bit of byte `i` (negative: from the end).
fn flipped(data: &[u8], i: isize) -> Vec<u8> {
    let mut t = data.to_vec();
    let i = if i < 0 { t.len() as isize + i } else { i } as usize;
    t[i] ^= 1;
    t
}

/// Every signature scheme the operations name (all keys, digests and paddings).
pub(crate) fn all_sig_algs() -> Vec<(SigAlg, SigFamily)> {
    let mut v = vec![];
    for bits in [2048, 3072, 4096] {
        for digest in DigestAlg::ALL {
            for padding in [RsaPadding::Pkcs1, RsaPadding::Pss] {
                v.push((SigAlg::Rsa { bits, digest, padding }, SigFamily::Rsa(bits)));
            }
        }
    }
    for digest in DigestAlg::ALL {
        v.push((SigAlg::EcdsaP256 { digest }, SigFamily::EcdsaP256));
        v.push((SigAlg::EcdsaP384 { digest }, SigFamily::EcdsaP384));
    }
    v.push((SigAlg::Ed25519, SigFamily::Ed25519));
    for level in MlDsaLevel::ALL {
        v.push((SigAlg::MlDsa(level), SigFamily::MlDsa(level)));
    }
    v
}

const AEADS: [AeadAlg; 3] = [AeadAlg::Aes128Gcm, AeadAlg::Aes256Gcm, AeadAlg::ChaCha20Poly1305];
const KEMS: [KemAlg; 4] = [KemAlg::MlKem512, KemAlg::MlKem768, KemAlg::MlKem1024, KemAlg::X25519MlKem768];
const ML_KEMS: [KemAlg; 3] = [KemAlg::MlKem512, KemAlg::MlKem768, KemAlg::MlKem1024];

/// How many of `caps` the table gives `name` (for the minimum counts).
fn count(name: &str, caps: impl IntoIterator<Item = Cap>) -> usize {
    caps.into_iter().filter(|&c| supports(name, c) == Some(true)).count()
}

// ---- digests and MACs ------------------------------------------------------------------------

/// Digests: the FIPS 180-4 / FIPS 202 "abc" examples, three times on one reused state, the
/// output length on 1000 bytes, and the same digest as every other backend.
pub(crate) fn digests(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    let msg = [0x5a; 1000];
    for &b in subjects {
        for alg in DigestAlg::ALL {
            let Some(mut d) = l.have(b, Cap::Digest(alg), b.digest(alg)) else { continue };
            let (want, source) = vectors::digest_abc(alg);
            let mut out = Vec::new();
            for i in 0..3 {
                let r = d.digest(b"abc", &mut out).map_err(|e| e.to_string());
                l.check(name(b), format!("{alg} {source}, call {}", i + 1), r.and_then(|()| same("digest", &out, &unhex(want))));
            }
            let r = d.digest(&msg, &mut out).map_err(|e| e.to_string());
            l.check(name(b), format!("{alg} output length"), r.and_then(|()| ensure(out.len() == alg.output_len(), format!("{} bytes", out.len()))));
            for &p in partners.iter().filter(|p| name(**p) != name(b)) {
                let Ok(mut theirs) = p.digest(alg) else { continue };
                let mut other = Vec::new();
                let r = theirs.digest(&msg, &mut other).map_err(|e| e.to_string());
                l.check_pair(name(b), name(p), format!("{alg} of 1000 bytes"), r.and_then(|()| same("digest", &out, &other)));
            }
        }
    }
}

/// HMAC: RFC 2202 / RFC 4231 test cases 1 and 2 (HMAC-SHA3-256: the computed vectors of
/// `kat/vectors`), three times on one keyed state, and the same tag as every other backend.
pub(crate) fn hmacs(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    for &b in subjects {
        for alg in DigestAlg::ALL {
            let (cases, source) = vectors::hmac(alg);
            for (v, number) in cases.iter().zip([1, 2, 6]) {
                let Some(mut m) = l.have(b, Cap::Hmac(alg), b.hmac(alg, v.key)) else { break };
                let mut out = Vec::new();
                for call in 0..3 {
                    let r = m.mac(v.data, &mut out).map_err(|e| e.to_string());
                    l.check(name(b), format!("HMAC-{alg} {source} case {number}, call {}", call + 1), r.and_then(|()| same("tag", &out, &unhex(v.tag))));
                }
            }
            let Ok(mut m) = b.hmac(alg, &[1; 32]) else { continue };
            let mut out = Vec::new();
            let r = m.mac(b"x", &mut out).map_err(|e| e.to_string());
            l.check(name(b), format!("HMAC-{alg} length"), r.and_then(|()| ensure(out.len() == alg.output_len(), format!("{} bytes", out.len()))));
            for &p in partners.iter().filter(|p| name(**p) != name(b)) {
                let Ok(mut theirs) = p.hmac(alg, &[1; 32]) else { continue };
                let mut other = Vec::new();
                let r = theirs.mac(b"x", &mut other).map_err(|e| e.to_string());
                l.check_pair(name(b), name(p), format!("HMAC-{alg}"), r.and_then(|()| same("tag", &out, &other)));
            }
        }
    }
}

// ---- AEADs -----------------------------------------------------------------------------------

/// Open `sealed` and require failure with `Failed`, and no plaintext left in the buffer.
fn refuses(a: &mut dyn Aead, nonce: &[u8; 12], aad: &[u8], sealed: &[u8]) -> std::result::Result<(), String> {
    let mut out = vec![0xee; 8];
    match a.open(nonce, aad, sealed, &mut out) {
        Ok(()) => Err("opened".into()),
        Err(BackendError::Unsupported(e)) => Err(format!("answered 'unsupported' ({e}) instead of failing")),
        Err(BackendError::Failed(_)) if !out.is_empty() => Err(format!("left {} bytes of plaintext behind", out.len())),
        Err(BackendError::Failed(_)) => Ok(()),
    }
}

/// AEADs: the published vectors (sealed exactly, opened exactly, a flipped tag refused), round
/// trips of 0, 33 and 1024 bytes with and without AAD on one reused key (sealing twice gives the
/// same bytes; a fresh key opens what the reused one sealed), and rejection of a flipped first
/// ciphertext byte, a flipped tag, other AAD, another nonce, a truncated input, after which the
/// key still opens; a 5-byte key is refused.
pub(crate) fn aeads(subjects: &[&dyn Backend], l: &mut Ledger) {
    const NONCE: [u8; 12] = [7; 12];
    for &b in subjects {
        let who = name(b);
        for alg in AEADS {
            let (vectors, source) = vectors::aead(alg);
            for (i, v) in vectors.iter().enumerate() {
                let Some(mut a) = l.have(b, Cap::Aead(alg), b.aead(alg, &unhex(v.key))) else { break };
                let nonce: [u8; 12] = unhex(v.nonce).try_into().expect("12-byte nonces");
                let (aad, pt, sealed) = (unhex(v.aad), unhex(v.plaintext), unhex(v.sealed));
                let mut out = Vec::new();
                let what = format!("{} {source} vector {}", alg.name(), i + 1);
                let r = a.seal(&nonce, &aad, &pt, &mut out).map_err(|e| e.to_string());
                l.check(who, format!("{what}: seal"), r.and_then(|()| same("sealed", &out, &sealed)));
                let r = a.open(&nonce, &aad, &sealed, &mut out).map_err(|e| e.to_string());
                l.check(who, format!("{what}: open"), r.and_then(|()| same("opened", &out, &pt)));
                l.check(who, format!("{what}: flipped tag"), refuses(&mut *a, &nonce, &aad, &flipped(&sealed, -1)));
            }
            let key = vec![0x42; alg.key_len()];
            let Some(mut a) = l.have(b, Cap::Aead(alg), b.aead(alg, &key)) else { continue };
            for (aad, len) in [(&b""[..], 0usize), (&b""[..], 1024), (&b"header"[..], 33)] {
                let what = format!("{} round trip of {len} bytes, AAD {:?}", alg.name(), String::from_utf8_lossy(aad));
                let pt: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let (mut sealed, mut again, mut opened) = (Vec::new(), Vec::new(), Vec::new());
                let r = (|| {
                    a.seal(&NONCE, aad, &pt, &mut sealed).map_err(|e| e.to_string())?;
                    a.seal(&NONCE, aad, &pt, &mut again).map_err(|e| e.to_string())?;
                    same("second seal with the reused key", &again, &sealed)?;
                    ensure(sealed.len() == len + AeadAlg::TAG_LEN, format!("sealed is {} bytes", sealed.len()))?;
                    a.open(&NONCE, aad, &sealed, &mut opened).map_err(|e| e.to_string())?;
                    same("opened", &opened, &pt)?;
                    let mut fresh = b.aead(alg, &key).map_err(|e| e.to_string())?;
                    fresh.open(&NONCE, aad, &sealed, &mut opened).map_err(|e| format!("a fresh key: {e}"))?;
                    same("opened with a fresh key", &opened, &pt)
                })();
                l.check(who, &what, r);
                if sealed.len() != len + AeadAlg::TAG_LEN {
                    continue;
                }
                for (tamper, bad_nonce, bad_aad, bad) in [
                    ("flipped first byte", NONCE, aad, flipped(&sealed, 0)),
                    ("flipped tag", NONCE, aad, flipped(&sealed, -1)),
                    ("other AAD", NONCE, &b"other"[..], sealed.clone()),
                    ("other nonce", [8; 12], aad, sealed.clone()),
                    ("truncated to 10 bytes", NONCE, aad, sealed[..10].to_vec()),
                ] {
                    l.check(who, format!("{what}: {tamper}"), refuses(&mut *a, &bad_nonce, bad_aad, &bad));
                }
                let r = a.open(&NONCE, aad, &sealed, &mut opened).map_err(|e| e.to_string());
                l.check(who, format!("{what}: the key opens again after failures"), r.and_then(|()| same("opened", &opened, &pt)));
            }
            let r = match b.aead(alg, &[0; 5]) {
                Err(BackendError::Failed(_)) => Ok(()),
                Err(BackendError::Unsupported(e)) => Err(format!("unsupported ({e}) instead of failed")),
                Ok(_) => Err("accepted".into()),
            };
            l.check(who, format!("{}: a 5-byte key is refused", alg.name()), r);
        }
    }
}

/// AEAD interoperation: for every ordered pair of backends with the algorithm, the same key,
/// nonce, AAD and plaintext give byte-identical sealed output, and each opens what the other
/// sealed.
pub(crate) fn aead_interop(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    const NONCE: [u8; 12] = [7; 12];
    for &b in subjects {
        for &p in partners.iter().filter(|p| name(**p) != name(b)) {
            for alg in AEADS {
                let key: Vec<u8> = (0..alg.key_len() as u8).collect();
                let pt: Vec<u8> = (0..100u8).collect();
                let Some(mut ours) = l.have(b, Cap::Aead(alg), b.aead(alg, &key)) else { continue };
                let Ok(mut theirs) = p.aead(alg, &key) else { continue };
                let (mut a, mut c, mut out) = (Vec::new(), Vec::new(), Vec::new());
                let r = (|| {
                    ours.seal(&NONCE, b"ad", &pt, &mut a).map_err(|e| e.to_string())?;
                    theirs.seal(&NONCE, b"ad", &pt, &mut c).map_err(|e| e.to_string())?;
                    same("sealed bytes", &a, &c)?;
                    theirs.open(&NONCE, b"ad", &a, &mut out).map_err(|e| format!("{} opening: {e}", name(p)))?;
                    same("opened by the other", &out, &pt)?;
                    ours.open(&NONCE, b"ad", &c, &mut out).map_err(|e| format!("{} opening: {e}", name(b)))?;
                    same("opened the other's", &out, &pt)
                })();
                l.check_pair(name(b), name(p), alg.name(), r);
            }
        }
    }
}

// ---- XTS-AES ---------------------------------------------------------------------------------

/// `Ok` when `r` is a refusal (`Failed`); the reason otherwise.
fn refused<T>(r: Result<T>) -> std::result::Result<(), String> {
    match r {
        Err(BackendError::Failed(_)) => Ok(()),
        Err(BackendError::Unsupported(e)) => Err(format!("answered 'unsupported' ({e}) instead of failing")),
        Ok(_) => Err("accepted".into()),
    }
}

/// XTS-AES: the IEEE 1619 vectors (`kat::xts_known_answer`: encrypt, decrypt, encrypt again on
/// one cipher); on a 4096-byte sector, a ciphertext unlike the plaintext, the same bytes twice,
/// other bytes under another sector number (the tweak is used), decryption back, also by a fresh
/// cipher; a key one byte short, a key with equal halves, an empty and a 4095-byte data unit
/// are refused, after which the cipher still encrypts as before.
pub(crate) fn xts_ciphers(subjects: &[&dyn Backend], l: &mut Ledger) {
    let pt: Vec<u8> = (0..4096).map(|i| (i % 251) as u8).collect();
    for &b in subjects {
        let who = name(b);
        for bits in XtsBits::ALL {
            let Some((source, verdict)) = l.have(b, Cap::Xts(bits), kat::xts_known_answer(b, bits)) else { continue };
            l.check(who, format!("{}: {source}", bits.name()), verdict);
            let key: Vec<u8> = (0..bits.key_len()).map(|i| (i * 7 + 1) as u8).collect();
            let Some(mut x) = l.have(b, Cap::Xts(bits), b.xts(bits, &key)) else { continue };
            let e = |e: BackendError| e.to_string();
            let mut ct = pt.clone();
            let r = (|| {
                x.encrypt_sector(5, &mut ct).map_err(e)?;
                ensure(ct != pt, "the ciphertext is the plaintext")?;
                let mut again = pt.clone();
                x.encrypt_sector(5, &mut again).map_err(e)?;
                same("encrypted twice", &again, &ct)?;
                let mut other = pt.clone();
                x.encrypt_sector(6, &mut other).map_err(e)?;
                ensure(other[..16] != ct[..16], "sectors 5 and 6 encrypt alike: the tweak is not used")?;
                let mut back = ct.clone();
                x.decrypt_sector(5, &mut back).map_err(e)?;
                same("decrypted", &back, &pt)?;
                let mut fresh = b.xts(bits, &key).map_err(e)?;
                fresh.decrypt_sector(6, &mut other).map_err(e)?;
                same("decrypted by a fresh cipher", &other, &pt)
            })();
            l.check(who, format!("{} round trip of a 4096-byte sector", bits.name()), r);
            let half = bits.key_len() / 2;
            l.check(who, format!("{}: a key one byte short is refused", bits.name()), refused(b.xts(bits, &key[1..])));
            let twin = [&key[..half], &key[..half]].concat();
            l.check(who, format!("{}: a key with equal halves is refused", bits.name()), refused(b.xts(bits, &twin)));
            for len in [0, 4095] {
                let mut unit = vec![0u8; len];
                l.check(who, format!("{}: a {len}-byte data unit is refused", bits.name()), refused(x.encrypt_sector(1, &mut unit)));
            }
            let mut again = pt.clone();
            let r = x.encrypt_sector(5, &mut again).map_err(e).and_then(|()| same("after refusals", &again, &ct));
            l.check(who, format!("{}: the cipher encrypts as before after refusals", bits.name()), r);
        }
    }
}

/// XTS interoperation: for every ordered pair of backends with the key size, the same key and
/// sector number give byte-identical ciphertext (sector 3 and sector 2^40 + 3, a tweak beyond
/// 32 bits), and each decrypts what the other encrypted.
pub(crate) fn xts_interop(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    let pt: Vec<u8> = (0..4096).map(|i| (i * 13 % 256) as u8).collect();
    for &b in subjects {
        for &p in partners.iter().filter(|p| name(**p) != name(b)) {
            for bits in XtsBits::ALL {
                let key: Vec<u8> = (0..bits.key_len() as u8).map(|i| i ^ 0xa5).collect();
                let Some(mut ours) = l.have(b, Cap::Xts(bits), b.xts(bits, &key)) else { continue };
                let Ok(mut theirs) = p.xts(bits, &key) else { continue };
                let e = |e: BackendError| e.to_string();
                let r = (|| {
                    for sector in [3u64, (1 << 40) + 3] {
                        let (mut a, mut c) = (pt.clone(), pt.clone());
                        ours.encrypt_sector(sector, &mut a).map_err(e)?;
                        theirs.encrypt_sector(sector, &mut c).map_err(e)?;
                        same(&format!("sector {sector:#x} encrypted"), &a, &c)?;
                        theirs.decrypt_sector(sector, &mut a).map_err(|x| format!("{} decrypting: {x}", name(p)))?;
                        same("decrypted by the other", &a, &pt)?;
                        ours.decrypt_sector(sector, &mut c).map_err(|x| format!("{} decrypting: {x}", name(b)))?;
                        same("the other's decrypted", &c, &pt)?;
                    }
                    Ok(())
                })();
                l.check_pair(name(b), name(p), bits.name(), r);
            }
        }
    }
}

// ---- signatures ------------------------------------------------------------------------------

/// `Ok` when `v` accepts `sig` for `msg`; the reason otherwise.
fn accepts(v: &mut dyn super::Verifier, msg: &[u8], sig: &[u8]) -> std::result::Result<(), String> {
    match v.verify(msg, sig) {
        Ok(true) => Ok(()),
        Ok(false) => Err("a valid signature did not verify".into()),
        Err(e) => Err(format!("verification failed: {e}")),
    }
}

/// `Ok` when `v` rejects `sig` for `msg` (as "not valid" or as an error).
fn rejects(v: &mut dyn super::Verifier, msg: &[u8], sig: &[u8], what: &str) -> std::result::Result<(), String> {
    match v.verify(msg, sig) {
        Ok(true) => Err(format!("{what} verified")),
        Ok(false) | Err(_) => Ok(()),
    }
}

/// Signatures, for every scheme a backend signs: two signatures of a message verify with the
/// same backend; another message, a flipped last byte and a truncated signature are rejected;
/// the verifier still accepts afterwards. Verify-only schemes are met in [`signature_interop`].
pub(crate) fn signature_round_trips(subjects: &[&dyn Backend], l: &mut Ledger) {
    let msg = b"cryptoperf sign/verify round trip";
    for &b in subjects {
        let who = name(b);
        for (alg, family) in all_sig_algs() {
            let key = keys::signing_key(family);
            let Some(mut s) = l.have(b, Cap::Sign(alg), b.signer(alg, &key)) else { continue };
            let Some(mut v) = l.have(b, Cap::Verify(alg), b.verifier(alg, key.public)) else { continue };
            for call in 1..=2 {
                let sig = match s.sign(msg) {
                    Ok(sig) if !sig.is_empty() => sig,
                    Ok(_) => {
                        l.fail(who, format!("{alg:?}: empty signature"));
                        continue;
                    }
                    Err(e) => {
                        l.fail(who, format!("{alg:?}: signing failed: {e}"));
                        continue;
                    }
                };
                let what = format!("{alg:?}, signature {call}");
                l.check(who, format!("{what}: verifies"), accepts(&mut *v, msg, &sig));
                l.check(who, format!("{what}: other message"), rejects(&mut *v, b"cryptoperf sign/verify round trip!", &sig, "a signature of another message"));
                l.check(who, format!("{what}: flipped last byte"), rejects(&mut *v, msg, &flipped(&sig, -1), "a tampered signature"));
                l.check(who, format!("{what}: flipped first byte"), rejects(&mut *v, msg, &flipped(&sig, 0), "a tampered signature"));
                l.check(who, format!("{what}: truncated"), rejects(&mut *v, msg, &sig[..sig.len() - 1], "a truncated signature"));
                l.check(who, format!("{what}: the verifier recovers"), accepts(&mut *v, msg, &sig));
                if let SigAlg::MlDsa(level) = alg {
                    l.check(who, format!("{what}: length"), ensure(sig.len() == level.lens().1, format!("{} bytes", sig.len())));
                }
            }
        }
    }
}

/// Signature known answers: RSA PKCS#1 v1.5 and Ed25519 (deterministic) reproduce the vectors
/// byte for byte, three times on one signer; every verifier accepts the vectors of its scheme
/// (RFC 8032 TEST 1, RFC 6979 A.2.5/A.2.6, the computed RSA and ECDSA signatures of "abc", the
/// ML-DSA signature of "abc") and rejects them for another message or tampered.
pub(crate) fn signature_known_answers(subjects: &[&dyn Backend], l: &mut Ledger) {
    for &b in subjects {
        let who = name(b);
        for (alg, family) in all_sig_algs() {
            let key = keys::signing_key(family);
            let (msg, sig, source): (&[u8], Vec<u8>, String) = match alg {
                SigAlg::Ed25519 => (b"", unhex(vectors::ED25519_TEST1_SIG), "RFC 8032 §7.1 TEST 1".into()),
                SigAlg::Rsa { bits, digest, padding } => (
                    b"abc",
                    vectors::rsa_abc(bits, digest, padding).expect("a computed RSA vector for every key, digest and padding"),
                    vectors::COMPUTED_SIG_SOURCE.into(),
                ),
                SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest } => {
                    let bits = if matches!(alg, SigAlg::EcdsaP384 { .. }) { 384 } else { 256 };
                    (b"abc", vectors::ecdsa_abc(bits, digest).expect("a computed ECDSA vector"), vectors::COMPUTED_SIG_SOURCE.into())
                }
                SigAlg::MlDsa(level) => (b"abc", vectors::ml_dsa(level).sig_abc.clone(), vectors::ML_DSA_SIG_SOURCE.into()),
            };
            if let Some(mut v) = l.have(b, Cap::Verify(alg), b.verifier(alg, key.public)) {
                l.check(who, format!("{alg:?} {source}: verifies"), accepts(&mut *v, msg, &sig));
                l.check(who, format!("{alg:?} {source}: other message"), rejects(&mut *v, b"abd", &sig, "the vector for another message"));
                l.check(who, format!("{alg:?} {source}: flipped"), rejects(&mut *v, msg, &flipped(&sig, -1), "the tampered vector"));
                l.check(who, format!("{alg:?}: 10 zero bytes"), rejects(&mut *v, msg, &[0; 10], "a 10-byte signature"));
                l.check(who, format!("{alg:?} {source}: verifies after failures"), accepts(&mut *v, msg, &sig));
            }
            let rfc = match alg {
                SigAlg::EcdsaP256 { digest: DigestAlg::Sha256 } => vectors::rfc6979(256, DigestAlg::Sha256),
                SigAlg::EcdsaP384 { digest: DigestAlg::Sha384 } => vectors::rfc6979(384, DigestAlg::Sha384),
                _ => None,
            };
            if let Some(rfc) = rfc {
                if let Some(mut v) = l.have(b, Cap::Verify(alg), b.verifier(alg, &unhex(rfc.public))) {
                    let sig = unhex(rfc.sig_der);
                    l.check(who, format!("{alg:?} RFC 6979: verifies"), accepts(&mut *v, rfc.msg, &sig));
                    l.check(who, format!("{alg:?} RFC 6979: flipped"), rejects(&mut *v, rfc.msg, &flipped(&sig, -1), "the tampered vector"));
                }
            }
            let deterministic = matches!(alg, SigAlg::Ed25519 | SigAlg::Rsa { padding: RsaPadding::Pkcs1, .. });
            if deterministic {
                if let Some(mut s) = l.have(b, Cap::Sign(alg), b.signer(alg, &key)) {
                    for call in 1..=3 {
                        let r = s.sign(msg).map_err(|e| e.to_string());
                        l.check(who, format!("{alg:?} {source}: signature {call}"), r.and_then(|got| same("signature", &got, &sig)));
                    }
                }
            }
        }
    }
}

/// Keys that do not fit: an RSA key of another size and an EC key on another curve are refused
/// (as `Failed`, not "unsupported") for signing and verification; an Ed25519 or ML-DSA seed
/// that does not belong to the public key is refused; truncated public keys are refused.
pub(crate) fn wrong_keys_are_refused(subjects: &[&dyn Backend], l: &mut Ledger) {
    let failed_not_unsupported = |r: Result<()>| match r {
        Err(BackendError::Failed(_)) => Ok(()),
        Err(BackendError::Unsupported(e)) => Err(format!("'unsupported' ({e}) instead of refused")),
        Ok(()) => Err("accepted".into()),
    };
    for &b in subjects {
        let who = name(b);
        let rsa2048 = keys::signing_key(SigFamily::Rsa(2048));
        for digest in [DigestAlg::Sha1, DigestAlg::Sha256] {
            for padding in [RsaPadding::Pkcs1, RsaPadding::Pss] {
                let alg = SigAlg::Rsa { bits: 3072, digest, padding };
                if supports(who, Cap::Sign(alg)) != Some(false) {
                    l.check(who, format!("{alg:?} signer with a 2048-bit key"), failed_not_unsupported(b.signer(alg, &rsa2048).map(drop)));
                }
                if supports(who, Cap::Verify(alg)) != Some(false) {
                    l.check(who, format!("{alg:?} verifier with a 2048-bit key"), failed_not_unsupported(b.verifier(alg, rsa2048.public).map(drop)));
                    let alg2048 = SigAlg::Rsa { bits: 2048, digest, padding };
                    l.check(who, format!("{alg2048:?} verifier with a truncated key"), failed_not_unsupported(b.verifier(alg2048, &rsa2048.public[..100]).map(drop)));
                }
            }
        }
        let (p256, p384) = (keys::signing_key(SigFamily::EcdsaP256), keys::signing_key(SigFamily::EcdsaP384));
        for (alg, wrong) in [
            (SigAlg::EcdsaP384 { digest: DigestAlg::Sha384 }, p256),
            (SigAlg::EcdsaP256 { digest: DigestAlg::Sha256 }, p384),
        ] {
            if supports(who, Cap::Sign(alg)) != Some(false) {
                l.check(who, format!("{alg:?} signer with a key on the other curve"), failed_not_unsupported(b.signer(alg, &wrong).map(drop)));
            }
            if supports(who, Cap::Verify(alg)) != Some(false) {
                l.check(who, format!("{alg:?} verifier with a key on the other curve"), failed_not_unsupported(b.verifier(alg, wrong.public).map(drop)));
            }
        }
        let ed = keys::signing_key(SigFamily::Ed25519);
        if supports(who, Cap::Sign(SigAlg::Ed25519)) != Some(false) {
            // RFC 7748's Alice key is 32 bytes, but not the public key of the RFC 8032 seed.
            let mismatched = KeyPair { public: keys::X25519_ALICE.public, ..ed };
            // OpenSSL and RustCrypto take the seed alone (and derive the public key): nothing
            // to mismatch there. aws-lc-rs and ring take both and must check they belong.
            if matches!(who, "aws-lc" | "ring") {
                l.check(who, "Ed25519 signer with a public key that is not the seed's", failed_not_unsupported(b.signer(SigAlg::Ed25519, &mismatched).map(drop)));
            }
            l.check(who, "Ed25519 verifier with a 31-byte key", failed_not_unsupported(b.verifier(SigAlg::Ed25519, &ed.public[..31]).map(drop)));
        }
        for level in MlDsaLevel::ALL {
            let alg = SigAlg::MlDsa(level);
            if supports(who, Cap::Sign(alg)) == Some(false) {
                continue;
            }
            let key = keys::signing_key(SigFamily::MlDsa(level));
            let other_seed = [7u8; 32];
            let wrong = KeyPair { private_raw: &other_seed, ..key };
            l.check(who, format!("{} signer with a seed that is not the public key's", level.name()), failed_not_unsupported(b.signer(alg, &wrong).map(drop)));
            l.check(who, format!("{} verifier with a truncated key", level.name()), failed_not_unsupported(b.verifier(alg, &key.public[..100]).map(drop)));
        }
    }
}

/// Signature interoperation: for every scheme and every ordered pair (signer, verifier) of
/// backends that have it, a signature made by one verifies with the other, which rejects it for
/// another message and tampered. Deterministic schemes (RSA PKCS#1 v1.5, Ed25519) give
/// byte-identical signatures across backends.
pub(crate) fn signature_interop(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    let msg = b"interop";
    let is_subject = |n: &str| subjects.iter().any(|s| name(*s) == n);
    for (alg, family) in all_sig_algs() {
        let key = keys::signing_key(family);
        // One signature per backend that signs (subjects through the ledger, partners as
        // references).
        let mut sigs: Vec<(&'static str, Vec<u8>)> = vec![];
        for &b in partners {
            let made = if is_subject(name(b)) {
                l.have(b, Cap::Sign(alg), b.signer(alg, &key))
            } else {
                b.signer(alg, &key).ok()
            };
            if let Some(mut s) = made {
                match s.sign(msg) {
                    Ok(sig) => sigs.push((name(b), sig)),
                    Err(e) => l.fail(name(b), format!("{alg:?}: signing failed: {e}")),
                }
            }
        }
        for &v in partners {
            let verifier = if is_subject(name(v)) {
                l.have(v, Cap::Verify(alg), v.verifier(alg, key.public))
            } else {
                v.verifier(alg, key.public).ok()
            };
            let Some(mut verifier) = verifier else { continue };
            for (signer, sig) in &sigs {
                if *signer == name(v) || !(is_subject(signer) || is_subject(name(v))) {
                    continue;
                }
                let r = accepts(&mut *verifier, msg, sig)
                    .and_then(|()| rejects(&mut *verifier, b"other", sig, "a signature of another message"))
                    .and_then(|()| rejects(&mut *verifier, msg, &flipped(sig, -1), "a tampered signature"));
                l.check_pair(signer, name(v), format!("{alg:?}: signed by {signer}, verified by {}", name(v)), r);
            }
        }
        if matches!(alg, SigAlg::Ed25519 | SigAlg::Rsa { padding: RsaPadding::Pkcs1, .. }) {
            for pair in sigs.windows(2) {
                let ((a, sa), (c, sc)) = (&pair[0], &pair[1]);
                if is_subject(a) || is_subject(c) {
                    l.check_pair(a, c, format!("{alg:?}: deterministic signatures"), same("signature", sa, sc));
                }
            }
        }
    }
}

// ---- key agreement ---------------------------------------------------------------------------

/// Key agreement: X25519 reproduces RFC 7748 §6.1 (both public keys, the shared secret from
/// both sides, twice); ECDH P-256 reproduces NIST CAVP ECC CDH COUNT = 0 and both fixed keys
/// agree; FFDH-2048 generated keys agree on a 256-byte secret. Bad peer keys are refused (X25519:
/// a small-order point and a short key; P-256: a point off the curve; FFDH: the public key 1) and
/// the key still works after. Generated X25519 key pairs differ, agree with each other and with
/// RFC 7748's Bob.
pub(crate) fn agreements(subjects: &[&dyn Backend], l: &mut Ledger) {
    let k = unhex(vectors::X25519_SHARED);
    for &b in subjects {
        let who = name(b);
        // X25519, RFC 7748 §6.1.
        let alice = l.have(b, Cap::Agree(KxAlg::X25519), b.agreement(KxAlg::X25519, Some(&keys::X25519_ALICE)));
        let bob = l.have(b, Cap::Agree(KxAlg::X25519), b.agreement(KxAlg::X25519, Some(&keys::X25519_BOB)));
        if let (Some(mut alice), Some(mut bob)) = (alice, bob) {
            l.check(who, "X25519 RFC 7748 Alice's public key", same("public key", &alice.public_key(), keys::X25519_ALICE.public));
            l.check(who, "X25519 RFC 7748 Bob's public key", same("public key", &bob.public_key(), keys::X25519_BOB.public));
            for call in 1..=2 {
                let r = alice.derive(keys::X25519_BOB.public).map_err(|e| e.to_string());
                l.check(who, format!("X25519 RFC 7748 K from Alice, call {call}"), r.and_then(|s| same("K", &s, &k)));
                let r = bob.derive(keys::X25519_ALICE.public).map_err(|e| e.to_string());
                l.check(who, format!("X25519 RFC 7748 K from Bob, call {call}"), r.and_then(|s| same("K", &s, &k)));
            }
            l.check(who, "X25519: the all-zero (small-order) peer key is refused", ensure(alice.derive(&[0; 32]).is_err(), "accepted"));
            l.check(who, "X25519: a 31-byte peer key is refused", ensure(alice.derive(&[9; 31]).is_err(), "accepted"));
            let r = alice.derive(keys::X25519_BOB.public).map_err(|e| e.to_string());
            l.check(who, "X25519: the key works after refusals", r.and_then(|s| same("K", &s, &k)));
        }
        // Generated X25519 key pairs (x25519-keygen, the hybrid's key shares).
        let ga = l.have(b, Cap::GenerateX25519, b.agreement(KxAlg::X25519, None));
        let gb = l.have(b, Cap::GenerateX25519, b.agreement(KxAlg::X25519, None));
        if let (Some(mut ga), Some(mut gb), Ok(mut bob)) = (ga, gb, b.agreement(KxAlg::X25519, Some(&keys::X25519_BOB))) {
            let r = (|| {
                ensure(ga.public_key().len() == 32, "public key length")?;
                ensure(ga.public_key() != gb.public_key(), "two generated key pairs are the same")?;
                ensure(ga.public_key() != keys::X25519_ALICE.public, "the generated key is RFC 7748's Alice")?;
                let ab = ga.derive(&gb.public_key()).map_err(|e| e.to_string())?;
                same("A·B vs B·A", &ab, &gb.derive(&ga.public_key()).map_err(|e| e.to_string())?)?;
                let with_bob = ga.derive(keys::X25519_BOB.public).map_err(|e| e.to_string())?;
                same("with Bob, both sides", &with_bob, &bob.derive(&ga.public_key()).map_err(|e| e.to_string())?)
            })();
            l.check(who, "X25519 generated key pairs", r);
        }
        // ECDH P-256: NIST CAVP, and the fixed key pair of `ops::keys` with its peer.
        {
            use vectors::cavp_ecdh_p256 as v;
            let (raw, public) = (unhex(v::D_IUT), unhex(v::Q_IUT));
            let iut = KeyPair { private_pkcs8: v::D_IUT_PKCS8, private_raw: &raw, public: &public };
            if let Some(mut a) = l.have(b, Cap::Agree(KxAlg::EcdhP256), b.agreement(KxAlg::EcdhP256, Some(&iut))) {
                l.check(who, "ECDH P-256 CAVP COUNT 0: our public key", same("public key", &a.public_key(), &public));
                let r = a.derive(&unhex(v::Q_CAVS)).map_err(|e| e.to_string());
                l.check(who, "ECDH P-256 CAVP COUNT 0: Z", r.and_then(|z| same("Z", &z, &unhex(v::Z))));
            }
            let (ours, peer) = keys::agreement_keys(KxAlg::EcdhP256).expect("fixed P-256 keys");
            let a = l.have(b, Cap::Agree(KxAlg::EcdhP256), b.agreement(KxAlg::EcdhP256, Some(&ours)));
            let c = l.have(b, Cap::Agree(KxAlg::EcdhP256), b.agreement(KxAlg::EcdhP256, Some(&peer)));
            if let (Some(mut a), Some(mut c)) = (a, c) {
                let r = (|| {
                    same("our public key", &a.public_key(), ours.public)?;
                    same("peer's public key", &c.public_key(), peer.public)?;
                    let s = a.derive(peer.public).map_err(|e| e.to_string())?;
                    ensure(s.len() == 32, format!("secret is {} bytes", s.len()))?;
                    same("secret from the other side", &c.derive(ours.public).map_err(|e| e.to_string())?, &s)?;
                    same("secret again", &a.derive(peer.public).map_err(|e| e.to_string())?, &s)?;
                    ensure(a.derive(&flipped(peer.public, 40)).is_err(), "a point off the curve was accepted")?;
                    same("secret after a refusal", &a.derive(peer.public).map_err(|e| e.to_string())?, &s)?;
                    // As a fresh exchange: the peer's key parsed and validated on each call.
                    for _ in 0..2 {
                        same("secret, validating", &a.derive_validated(peer.public).map_err(|e| e.to_string())?, &s)?;
                    }
                    ensure(a.derive_validated(&flipped(peer.public, 40)).is_err(), "validating: a point off the curve was accepted")?;
                    same("secret, validating, after a refusal", &a.derive_validated(peer.public).map_err(|e| e.to_string())?, &s)
                })();
                l.check(who, "ECDH P-256 fixed keys", r);
            }
            // Generated P-256 key pairs (ephemeral shares, e.g. the ike-phase1 workload).
            let ga = l.have(b, Cap::GenerateP256, b.agreement(KxAlg::EcdhP256, None));
            let gb = l.have(b, Cap::GenerateP256, b.agreement(KxAlg::EcdhP256, None));
            if let (Some(mut ga), Some(mut gb), Ok(mut c)) = (ga, gb, b.agreement(KxAlg::EcdhP256, Some(&peer))) {
                let r = (|| {
                    let pa = ga.public_key();
                    ensure(pa.len() == 65 && pa[0] == 4, format!("public key is {} bytes, not an uncompressed point", pa.len()))?;
                    ensure(pa != gb.public_key(), "two generated key pairs are the same")?;
                    ensure(pa != ours.public, "the generated key is the fixed key")?;
                    let ab = ga.derive(&gb.public_key()).map_err(|e| e.to_string())?;
                    ensure(ab.len() == 32, format!("secret is {} bytes", ab.len()))?;
                    same("A·B vs B·A", &ab, &gb.derive(&pa).map_err(|e| e.to_string())?)?;
                    let with_peer = ga.derive(peer.public).map_err(|e| e.to_string())?;
                    same("with the fixed peer, both sides", &with_peer, &c.derive(&pa).map_err(|e| e.to_string())?)
                })();
                l.check(who, "ECDH P-256 generated key pairs", r);
            }
            // Where the library has no such key pair, it says so, with a reason, and fails nothing.
            let r = match (supports(who, Cap::GenerateP256), b.agreement(KxAlg::EcdhP256, None)) {
                (Some(false), Err(BackendError::Unsupported(why))) => ensure(!why.is_empty(), "no reason given"),
                (Some(false), Err(e)) => Err(format!("failed instead of unsupported: {e}")),
                (Some(false), Ok(_)) => Err("generated a key pair it is documented not to have".into()),
                _ => Ok(()),
            };
            l.check(who, "ECDH P-256 key generation: had, or unsupported with a reason", r);
        }
        // FFDH-2048 (RFC 3526 group 14): generated key pairs.
        let fa = l.have(b, Cap::Agree(KxAlg::Ffdh2048), b.agreement(KxAlg::Ffdh2048, None));
        let fb = l.have(b, Cap::Agree(KxAlg::Ffdh2048), b.agreement(KxAlg::Ffdh2048, None));
        if let (Some(mut fa), Some(mut fb)) = (fa, fb) {
            let r = (|| {
                let (pa, pb) = (fa.public_key(), fb.public_key());
                ensure(pa.len() == 256, format!("public key is {} bytes", pa.len()))?;
                ensure(pa != pb, "two generated key pairs are the same")?;
                let s = fa.derive(&pb).map_err(|e| e.to_string())?;
                ensure(s.len() == 256, format!("secret is {} bytes", s.len()))?;
                same("secret from the other side", &fb.derive(&pa).map_err(|e| e.to_string())?, &s)?;
                same("secret again", &fa.derive(&pb).map_err(|e| e.to_string())?, &s)?;
                let mut one = [0; 256];
                one[255] = 1;
                ensure(fa.derive(&one).is_err(), "the public key 1 was accepted")?;
                // p − 2: in range, but of order 2q; only the full validation (y^q = 1 mod p)
                // refuses it. Whichever validation the library makes, the first derive with a
                // peer and every validated one make the same. (OpenSSL 3.0 refuses it, AWS-LC
                // accepts it: `kat` reports which.)
                let mut p_minus_2 = unhex(vectors::MODP2048_P);
                p_minus_2[255] -= 2;
                let refused = fa.derive(&p_minus_2).is_err();
                ensure(fa.derive_validated(&p_minus_2).is_err() == refused, "derive and derive_validated validate differently")?;
                for _ in 0..2 {
                    same("secret, validating", &fa.derive_validated(&pb).map_err(|e| e.to_string())?, &s)?;
                }
                for k in [&fa, &fb] {
                    let bits = k.private_bits().ok_or("no private exponent length")?;
                    ensure(bits <= FFDH2048_PRIVATE_BITS && bits > FFDH2048_PRIVATE_BITS - 25, format!("a {bits}-bit private exponent"))?;
                }
                Ok(())
            })();
            l.check(who, "FFDH-2048 generated keys", r);
        }
    }
}

/// Key agreement across backends: X25519 (RFC 7748 Alice on one, Bob on the other, and a
/// generated key on one with Bob on the other) and ECDH P-256 (the fixed key on one, its peer on
/// the other) derive the same secret on both sides.
pub(crate) fn agreement_interop(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    for &b in subjects {
        for &p in partners.iter().filter(|p| name(**p) != name(b)) {
            for alg in [KxAlg::X25519, KxAlg::EcdhP256] {
                let (ours, peer) = keys::agreement_keys(alg).expect("fixed keys");
                let Some(mut a) = l.have(b, Cap::Agree(alg), b.agreement(alg, Some(&ours))) else { continue };
                let Ok(mut c) = p.agreement(alg, Some(&peer)) else { continue };
                let r = (|| {
                    let x = a.derive(&c.public_key()).map_err(|e| e.to_string())?;
                    same("secrets of both sides", &x, &c.derive(&a.public_key()).map_err(|e| e.to_string())?)
                })();
                l.check_pair(name(b), name(p), format!("{alg:?} fixed keys"), r);
            }
            // FFDH-2048: generated keys on each side, each validating the other's public key.
            if let (Some(mut f), Ok(mut q)) = (
                l.have(b, Cap::Agree(KxAlg::Ffdh2048), b.agreement(KxAlg::Ffdh2048, None)),
                p.agreement(KxAlg::Ffdh2048, None),
            ) {
                let r = (|| {
                    let x = f.derive_validated(&q.public_key()).map_err(|e| e.to_string())?;
                    same("secrets of both sides", &x, &q.derive_validated(&f.public_key()).map_err(|e| e.to_string())?)
                })();
                l.check_pair(name(b), name(p), "FFDH-2048 generated keys", r);
            }
            let Some(mut g) = l.have(b, Cap::GenerateX25519, b.agreement(KxAlg::X25519, None)) else { continue };
            let Ok(mut bob) = p.agreement(KxAlg::X25519, Some(&keys::X25519_BOB)) else { continue };
            let r = (|| {
                let x = g.derive(keys::X25519_BOB.public).map_err(|e| e.to_string())?;
                same("secrets of both sides", &x, &bob.derive(&g.public_key()).map_err(|e| e.to_string())?)
            })();
            l.check_pair(name(b), name(p), "X25519 generated key with RFC 7748 Bob", r);
        }
    }
}

/// Key shares (`key_share`, what `-keygen` times): for each key agreement, two fresh shares
/// have public keys of the algorithm's form that differ and derive the same secret with each
/// other; a third share derives with every partner's key (RFC 7748's Bob, the fixed P-256
/// peer, a generated FFDH key) the secret that partner derives after validating the share's
/// public key; a bad peer key (all-zero X25519, a point off the curve, the FFDH key 1) is
/// refused. Where the library lacks it, it says why.
pub(crate) fn key_shares(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    for &b in subjects {
        let who = name(b);
        for alg in KxAlg::ALL {
            let cap = Cap::KeyShare(alg);
            let (Some(x), Some(y), Some(z)) = (
                l.have(b, cap, b.key_share(alg)),
                l.have(b, cap, b.key_share(alg)),
                l.have(b, cap, b.key_share(alg)),
            ) else {
                continue;
            };
            let (px, py) = (x.public_key().to_vec(), y.public_key().to_vec());
            let form = match alg {
                KxAlg::X25519 => ensure(px.len() == 32, format!("public key is {} bytes", px.len())),
                KxAlg::EcdhP256 => ensure(px.len() == 65 && px[0] == 4, format!("public key is {} bytes, not an uncompressed point", px.len())),
                KxAlg::Ffdh2048 => ensure(px.len() == 256, format!("public key is {} bytes", px.len())),
            };
            let r = form.and_then(|()| {
                ensure(px != py, "two generated key pairs are the same")?;
                let s = x.derive(&py).map_err(|e| e.to_string())?;
                same("X·Y vs Y·X", &s, &y.derive(&px).map_err(|e| e.to_string())?)
            });
            l.check(who, format!("{} key shares", alg.name()), r);
            let bad = match alg {
                KxAlg::X25519 => vec![0; 32],
                KxAlg::EcdhP256 => flipped(keys::ECDH_P256_PEER.public, 40),
                KxAlg::Ffdh2048 => {
                    let mut one = vec![0; 256];
                    one[255] = 1;
                    one
                }
            };
            l.check(who, format!("{}: a share refuses a bad peer key", alg.name()), ensure(z.derive(&bad).is_err(), "accepted"));
            for &p in partners.iter().filter(|p| name(**p) != who) {
                let Ok(mut theirs) = kat::fixed_peer(p, alg) else { continue };
                let Ok(share) = b.key_share(alg) else { continue };
                let r = (|| {
                    let t = theirs.derive_validated(share.public_key()).map_err(|e| format!("refused our share: {e}"))?;
                    same("secrets of both sides", &share.derive(&theirs.public_key()).map_err(|e| e.to_string())?, &t)
                })();
                l.check_pair(who, name(p), format!("{} key share", alg.name()), r);
            }
        }
    }
}

// ---- KEMs ------------------------------------------------------------------------------------

/// Decapsulate, mapping errors to text.
fn decaps(dk: &mut dyn KemDecapsulator, ct: &[u8]) -> std::result::Result<Vec<u8>, String> {
    dk.decaps(ct).map_err(|e| e.to_string())
}

/// KEM round trips (ML-KEM-512/768/1024, X25519MLKEM768): generated keys have FIPS 203 (or TLS
/// key-share) sizes and differ; encapsulating twice to one parsed key decapsulates to the
/// secret each time; a flipped ciphertext byte decapsulates without error to another secret
/// (implicit rejection, FIPS 203 §6.3; the hybrid's X25519 half is unchanged by the first
/// byte); a 10-byte ciphertext and a truncated encapsulation key are refused.
pub(crate) fn kem_round_trips(subjects: &[&dyn Backend], l: &mut Ledger) {
    for &b in subjects {
        let who = name(b);
        for alg in KEMS {
            let (ek_len, ct_len, ss_len) = alg.lens();
            let Some(mut dk) = l.have(b, Cap::Kem(alg), b.kem_keypair(alg)) else { continue };
            let ek = dk.encapsulation_key();
            let Some(mut enc) = l.have(b, Cap::Kem(alg), b.kem_encapsulator(alg, &ek)) else { continue };
            l.check(who, format!("{}: encapsulation key length", alg.display()), ensure(ek.len() == ek_len, format!("{} bytes", ek.len())));
            if let Ok(other) = b.kem_keypair(alg) {
                l.check(who, format!("{}: two generated keys differ", alg.display()), ensure(other.encapsulation_key() != ek, "same key"));
            }
            for call in 1..=2 {
                let r = (|| {
                    let (ct, ss) = enc.encaps().map_err(|e| e.to_string())?;
                    ensure((ct.len(), ss.len()) == (ct_len, ss_len), format!("ciphertext {} and secret {} bytes", ct.len(), ss.len()))?;
                    same("decapsulated", &decaps(&mut *dk, &ct)?, &ss)?;
                    let rejected = decaps(&mut *dk, &flipped(&ct, 0)).map_err(|e| format!("implicit rejection must not fail: {e}"))?;
                    ensure(rejected != ss, "a tampered ciphertext gave the same secret")?;
                    ensure(rejected.len() == ss_len, "implicit-rejection secret length")
                })();
                l.check(who, format!("{}: round trip {call}", alg.display()), r);
            }
            l.check(who, format!("{}: a 10-byte ciphertext is refused", alg.display()), ensure(dk.decaps(&[0; 10]).is_err(), "accepted"));
            l.check(who, format!("{}: a truncated encapsulation key is refused", alg.display()), ensure(b.kem_encapsulator(alg, &ek[..ek.len() / 2]).is_err(), "accepted"));
        }
    }
}

/// ML-KEM known answers from the NIST ACVP test cases of `kat/vectors`: an imported
/// decapsulation key decapsulates the test case's ciphertext to its key and a tampered one to
/// its implicit-rejection key, and exports the same key; seeded key generation gives the
/// expected keys; encapsulation with the test case's m gives its ciphertext and key.
pub(crate) fn kem_known_answers(subjects: &[&dyn Backend], l: &mut Ledger) {
    use sha2::Digest as _;
    let sha256 = |d: &[u8]| sha2::Sha256::digest(d).to_vec();
    for &b in subjects {
        let who = name(b);
        for alg in ML_KEMS {
            let v = vectors::ml_kem(alg);
            let what = format!("{} {}", alg.display(), v.source);
            if let Some(mut dk) = l.have(b, Cap::KemImport(alg), b.kem_decapsulator(alg, &v.dk)) {
                l.check(who, format!("{what}: ek inside dk"), same("ek", &dk.encapsulation_key(), v.ek(alg.rank())));
                l.check(who, format!("{what}: decapsulation"), decaps(&mut *dk, &v.c).and_then(|k| same("K", &k, &v.k)));
                l.check(who, format!("{what}: implicit rejection"), decaps(&mut *dk, &flipped(&v.c, 0)).and_then(|k| same("K̄", &k, &v.k_rejected)));
                l.check(who, format!("{what}: exported dk"), dk.decapsulation_key().map_err(|e| e.to_string()).and_then(|d| same("dk", &d, &v.dk)));
            }
            if let Some(kp) = l.have(b, Cap::KemSeeded(alg), b.kem_keypair_from_seed(alg, &v.keygen_d, &v.keygen_z)) {
                l.check(who, format!("{what}: seeded ek"), same("SHA-256 of ek", &sha256(&kp.encapsulation_key()), &v.keygen_ek_sha256));
                let r = kp.decapsulation_key().map_err(|e| e.to_string());
                l.check(who, format!("{what}: seeded dk"), r.and_then(|d| same("SHA-256 of dk", &sha256(&d), &v.keygen_dk_sha256)));
            }
            let Some(mut enc) = l.have(b, Cap::Kem(alg), b.kem_encapsulator(alg, v.ek(alg.rank()))) else { continue };
            if let Some((ct, k)) = l.have(b, Cap::KemEncapsWithM(alg), enc.encaps_with(&v.m)) {
                l.check(who, format!("{what}: encapsulation with m"), same("c", &ct, &v.c).and(same("K", &k, &v.k)));
            }
        }
    }
}

/// KEM interoperation: for every ordered pair, a key pair generated by one decapsulates what the
/// other encapsulates to its key (all four KEMs, the hybrid included).
pub(crate) fn kem_interop(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    for &b in subjects {
        for &p in partners.iter().filter(|p| name(**p) != name(b)) {
            for alg in KEMS {
                // b decapsulates what p encapsulates, and the reverse.
                let Some(mut ours) = l.have(b, Cap::Kem(alg), b.kem_keypair(alg)) else { continue };
                let Ok(mut theirs) = p.kem_keypair(alg) else { continue };
                let r = (|| {
                    let (ct, ss) = p.kem_encapsulator(alg, &ours.encapsulation_key()).and_then(|mut e| e.encaps()).map_err(|e| e.to_string())?;
                    same("secret", &decaps(&mut *ours, &ct)?, &ss)
                })();
                l.check_pair(name(p), name(b), format!("{}: encapsulated by {}, decapsulated by {}", alg.display(), name(p), name(b)), r);
                let r = (|| {
                    let (ct, ss) = b.kem_encapsulator(alg, &theirs.encapsulation_key()).and_then(|mut e| e.encaps()).map_err(|e| e.to_string())?;
                    same("secret", &decaps(&mut *theirs, &ct)?, &ss)
                })();
                l.check_pair(name(b), name(p), format!("{}: encapsulated by {}, decapsulated by {}", alg.display(), name(b), name(p)), r);
            }
        }
    }
}

// ---- ML-DSA key generation -------------------------------------------------------------------

/// ML-DSA key generation: the ACVP key-generation test case's public key from its seed; a
/// generated key pair's public key has the FIPS 204 length, differs from the next, and its
/// signature verifies (and, tampered, does not) with every backend that verifies ML-DSA; the
/// signer of the fixed key is hedged (two signatures of one message differ).
pub(crate) fn ml_dsa_keys(subjects: &[&dyn Backend], partners: &[&dyn Backend], l: &mut Ledger) {
    for &b in subjects {
        let who = name(b);
        for level in MlDsaLevel::ALL {
            let alg = SigAlg::MlDsa(level);
            let v = vectors::ml_dsa(level);
            if let Some(g) = l.have(b, Cap::SigKeygenSeeded(level), b.sig_keygen(alg, Some(&v.seed))) {
                l.check(who, format!("{} {}: public key from the seed", level.name(), v.keygen_source), same("pk", &g.public, &v.pk));
            }
            let Some(mut g) = l.have(b, Cap::SigKeygen(level), b.sig_keygen(alg, None)) else { continue };
            let other = b.sig_keygen(alg, None).map(|o| o.public).unwrap_or_default();
            l.check(who, format!("{}: generated public key", level.name()), ensure(g.public.len() == level.lens().0 && g.public != other, "wrong length, or two generated keys are the same"));
            let sig = match g.signer.sign(b"x") {
                Ok(sig) => sig,
                Err(e) => {
                    l.fail(who, format!("{}: signing with a generated key: {e}", level.name()));
                    continue;
                }
            };
            for &p in partners {
                let Ok(mut verifier) = p.verifier(alg, &g.public) else { continue };
                let r = accepts(&mut *verifier, b"x", &sig).and_then(|()| rejects(&mut *verifier, b"x", &flipped(&sig, -1), "a tampered signature"));
                if name(p) == who {
                    l.check(who, format!("{}: generated key round trip", level.name()), r);
                } else {
                    l.check_pair(who, name(p), format!("{}: generated key", level.name()), r);
                }
            }
            if let Ok(mut s) = b.signer(alg, &keys::signing_key(SigFamily::MlDsa(level))) {
                let r = (|| {
                    let (a, c) = (s.sign(b"m").map_err(|e| e.to_string())?, s.sign(b"m").map_err(|e| e.to_string())?);
                    ensure(a != c, "two signatures of one message are equal: signing is not hedged")
                })();
                l.check(who, format!("{}: hedged signing", level.name()), r);
            }
        }
    }
}

// ---- the tests -------------------------------------------------------------------------------

/// Run one suite function on this build's subjects and partners and assert it clean, with the
/// minimum count per backend.
fn run(test: &str, f: impl Fn(&[&dyn Backend], &[&dyn Backend], &mut Ledger), min: impl Fn(&str) -> usize) -> Ledger {
    let (s, p) = (subjects(), partners());
    let (s, p) = (refs(&s), refs(&p));
    assert!(!s.is_empty(), "no backend to check in this build");
    let mut l = Ledger::default();
    f(&s, &p, &mut l);
    println!(
        "{test}: checked {:?}; {} interoperation checks over {} ordered backend pairs; {} skipped",
        l.checked,
        l.pair_checks,
        l.pairs.len(),
        l.skipped.len()
    );
    l.assert_clean(test, &s, min);
    l
}

/// The other backends `name` interoperates with for `cap` (both have it).
fn peers_with(name: &str, cap: Cap) -> usize {
    if supports(name, cap) != Some(true) {
        return 0;
    }
    NAMES.iter().filter(|&&n| n != name && supports(n, cap) == Some(true)).count()
}

#[test]
fn digests_conform() {
    // "abc" three times, the length; and one check per partner with the digest.
    run("digests", digests, |n| {
        DigestAlg::ALL.iter().map(|&d| if supports(n, Cap::Digest(d)) == Some(true) { 4 + peers_with(n, Cap::Digest(d)) } else { 0 }).sum()
    });
}

#[test]
fn hmacs_conform() {
    run("hmacs", hmacs, |n| {
        DigestAlg::ALL.iter().map(|&d| if supports(n, Cap::Hmac(d)) == Some(true) { 7 + peers_with(n, Cap::Hmac(d)) } else { 0 }).sum()
    });
}

#[test]
fn aeads_conform() {
    // Per AEAD: 3 checks per published vector (2 or 1 of them), 3 × (1 + 5 + 1) round-trip
    // checks, the short key.
    run("aeads", |s, _, l| aeads(s, l), |n| count(n, AEADS.map(Cap::Aead)) * (3 + 21 + 1));
}

#[test]
fn aeads_interoperate() {
    let l = run("aead interop", aead_interop, |n| AEADS.iter().map(|&a| peers_with(n, Cap::Aead(a))).sum());
    assert!(!l.pairs.is_empty(), "no two backends were compared");
}

#[test]
fn xts_ciphers_conform() {
    // Per key size: the vectors, the round trip, 2 bad keys, 2 bad units, reuse after them.
    run("xts", |s, _, l| xts_ciphers(s, l), |n| count(n, XtsBits::ALL.map(Cap::Xts)) * 7);
}

#[test]
fn xts_ciphers_interoperate() {
    run("xts interop", xts_interop, |n| XtsBits::ALL.iter().map(|&b| peers_with(n, Cap::Xts(b))).sum());
}

#[test]
fn signatures_round_trip_and_reject_tampering() {
    run("signature round trips", |s, _, l| signature_round_trips(s, l), |n| {
        all_sig_algs().into_iter().filter(|&(a, _)| supports(n, Cap::Sign(a)) == Some(true) && supports(n, Cap::Verify(a)) == Some(true)).count() * 12
    });
}

#[test]
fn signatures_reproduce_known_answers() {
    run("signature known answers", |s, _, l| signature_known_answers(s, l), |n| {
        count(n, all_sig_algs().into_iter().map(|(a, _)| Cap::Verify(a))) * 5
    });
}

#[test]
fn wrong_keys_are_refused_by_every_backend() {
    // RSA: 12 (ring: 8, no SHA-1 signing or PSS); EC: 4; Ed25519: 1 or 2; ML-DSA: 6.
    run("wrong keys", |s, _, l| wrong_keys_are_refused(s, l), |n| match n {
        "openssl" => 17,
        "aws-lc" => 24,
        "ring" => 14,
        _ => 23,
    });
}

#[test]
fn signatures_interoperate() {
    let l = run("signature interop", signature_interop, |n| {
        all_sig_algs().into_iter().map(|(a, _)| peers_with(n, Cap::Verify(a)).min(peers_with(n, Cap::Sign(a)))).sum()
    });
    // Every subject met at least one other backend (in the default build, all 12 ordered
    // pairs of the 4 backends meet).
    let expected_pairs = if cfg!(feature = "fips") { 2 } else { NAMES.len() * (NAMES.len() - 1) };
    assert!(l.pairs.len() >= expected_pairs, "only {} pairs: {:?}", l.pairs.len(), l.pairs);
}

#[test]
fn key_agreements_conform() {
    run("agreements", |s, _, l| agreements(s, l), |n| {
        let x = if supports(n, Cap::Agree(KxAlg::X25519)) == Some(true) { 9 + 1 } else { 0 };
        let e = if supports(n, Cap::Agree(KxAlg::EcdhP256)) == Some(true) { 3 } else { 0 };
        let f = if supports(n, Cap::Agree(KxAlg::Ffdh2048)) == Some(true) { 1 } else { 0 };
        x + e + f + 1
    });
}

#[test]
fn key_agreements_interoperate() {
    run("agreement interop", agreement_interop, |n| {
        peers_with(n, Cap::Agree(KxAlg::X25519)) * 2
            + peers_with(n, Cap::Agree(KxAlg::EcdhP256))
            + peers_with(n, Cap::Agree(KxAlg::Ffdh2048))
    });
}

#[test]
fn key_shares_conform_and_interoperate() {
    run("key shares", key_shares, |n| {
        KxAlg::ALL
            .into_iter()
            .filter(|&k| supports(n, Cap::KeyShare(k)) == Some(true))
            .map(|k| 2 + NAMES.iter().filter(|&&o| o != n && supports(o, Cap::Agree(k)) == Some(true)).count())
            .sum()
    });
}

#[test]
fn kems_round_trip() {
    run("KEM round trips", |s, _, l| kem_round_trips(s, l), |n| count(n, KEMS.map(Cap::Kem)) * 6);
}

#[test]
fn kems_reproduce_known_answers() {
    run("KEM known answers", |s, _, l| kem_known_answers(s, l), |n| {
        count(n, ML_KEMS.map(Cap::KemImport)) * 4 + count(n, ML_KEMS.map(Cap::KemSeeded)) * 2 + count(n, ML_KEMS.map(Cap::KemEncapsWithM))
    });
}

#[test]
fn kems_interoperate() {
    run("KEM interop", kem_interop, |n| KEMS.iter().map(|&k| 2 * peers_with(n, Cap::Kem(k))).sum());
}

#[test]
fn ml_dsa_keys_conform() {
    run("ML-DSA keys", ml_dsa_keys, |n| count(n, MlDsaLevel::ALL.map(Cap::SigKeygen)) * 4);
}

/// Every canonical operation prepares and runs once on every backend, or is unsupported exactly
/// where the support table says the backend lacks it (through `ops::prepare`, the timed path).
#[test]
fn every_operation_prepares_or_is_unsupported() {
    use crate::ops::{prepare::prepare, Op, Params};
    let s = subjects();
    let mut ran = BTreeMap::<&str, usize>::new();
    for b in &s {
        for op_name in crate::ops::ALL_OPS {
            let op = Op::parse(op_name).expect("canonical names parse");
            let params = Params::resolve(op, &Default::default()).expect("default parameters");
            match prepare(&**b, op, &params) {
                Ok(mut f) => {
                    f().unwrap_or_else(|e| panic!("{} {op_name}: {e}", name(&**b)));
                    *ran.entry(name(&**b)).or_default() += 1;
                }
                Err(BackendError::Unsupported(_)) => {}
                Err(e) => panic!("{} {op_name}: {e}", name(&**b)),
            }
        }
    }
    for b in &s {
        // Of the 53 operations: OpenSSL lacks the 21 post-quantum ones (ML-DSA, ML-KEM, the
        // hybrid); ring those and SHA3-256 and the 6 key agreements but for the X25519 and
        // P-256 key shares; RustCrypto the 3 FFDH ones.
        let want = match name(&**b) { "ring" => 25, "openssl" => 32, "aws-lc" => 53, _ => 50 };
        assert_eq!(ran.get(name(&**b)).copied().unwrap_or(0), want, "{}: operations that ran", name(&**b));
    }
}

// ---- the suite can fail ----------------------------------------------------------------------

/// Every suite function, run on backends that are deliberately wrong, reports failures: the
/// `mock` backend (fixed outputs, a verifier that accepts everything, an AEAD that neither
/// encrypts nor authenticates) and the broken backends of `kat::tests` (one output bit
/// flipped, signatures of another message).
#[test]
fn suite_functions_fail_on_broken_backends() {
    type Suite = fn(&[&dyn Backend], &[&dyn Backend], &mut Ledger);
    let suites: [(&str, Suite); 16] = [
        ("digests", digests),
        ("hmacs", hmacs),
        ("aeads", |s, _, l| aeads(s, l)),
        ("aead interop", aead_interop),
        ("signature round trips", |s, _, l| signature_round_trips(s, l)),
        ("signature known answers", |s, _, l| signature_known_answers(s, l)),
        ("wrong keys", |s, _, l| wrong_keys_are_refused(s, l)),
        ("signature interop", signature_interop),
        ("agreements", |s, _, l| agreements(s, l)),
        ("agreement interop", agreement_interop),
        ("key shares", key_shares),
        ("KEM round trips", |s, _, l| kem_round_trips(s, l)),
        ("KEM interop", kem_interop),
        ("ML-DSA keys", ml_dsa_keys),
        ("xts", |s, _, l| xts_ciphers(s, l)),
        ("xts interop", xts_interop),
    ];
    let mock = by_name("mock").expect("the mock backend");
    let openssl = by_name("openssl").expect("openssl");
    // Partners with every algorithm between them (AWS-LC has the post-quantum ones), and fast
    // in a debug build.
    let awslc = by_name("aws-lc").expect("aws-lc");
    for (test, f) in suites {
        let mut l = Ledger::default();
        f(&[&*mock], &[&*mock, &*openssl, &*awslc], &mut l);
        assert!(!l.failures.is_empty(), "{test}: the mock backend passed (checked {:?})", l.checked);
    }
    // The broken backends pass nothing they compute.
    let broken = crate::kat::tests::Broken;
    for (test, f) in [
        ("digests", digests as Suite),
        ("hmacs", hmacs),
        ("aeads", |s, _, l| aeads(s, l)),
        ("signature known answers", |s, _, l| signature_known_answers(s, l)),
        ("signature interop", signature_interop),
        ("agreements", |s, _, l| agreements(s, l)),
        ("agreement interop", agreement_interop),
        ("key shares", key_shares),
        ("xts", |s, _, l| xts_ciphers(s, l)),
        ("xts interop", xts_interop),
    ] {
        let mut l = Ledger::default();
        f(&[&broken], &[&broken, &*openssl], &mut l);
        assert!(!l.failures.is_empty(), "{test}: the broken backend passed (checked {:?})", l.checked);
    }
    let broken_pq = crate::kat::tests::BrokenPq;
    for (test, f) in [
        // (Its encapsulation and decapsulation are wrong alike, so its own round trips agree:
        // the mock backend fails those.)
        ("KEM known answers", (|s, _, l| kem_known_answers(s, l)) as Suite),
        ("KEM interop", kem_interop),
        ("ML-DSA keys", ml_dsa_keys),
    ] {
        let mut l = Ledger::default();
        f(&[&broken_pq], &[&broken_pq, &*awslc], &mut l);
        assert!(!l.failures.is_empty(), "{test}: the broken post-quantum backend passed (checked {:?})", l.checked);
    }
}

/// The ledger fails a backend that says "unsupported" for what the table says it has, or that
/// has what the table says it lacks, and a test whose backends checked too little.
#[test]
fn the_ledger_holds_backends_to_the_table() {
    let openssl = by_name("openssl").expect("openssl");
    let mut l = Ledger::default();
    assert!(l.have::<()>(&*openssl, Cap::Aead(AeadAlg::Aes128Gcm), Err(BackendError::Unsupported("no".into()))).is_none());
    assert_eq!(l.failures.len(), 1, "'unsupported' for what the table says openssl has");
    assert!(l.have(&*openssl, Cap::Kem(KemAlg::MlKem768), Ok(())).is_none());
    assert_eq!(l.failures.len(), 2, "success for what the table says openssl lacks");
    assert!(l.have::<()>(&*openssl, Cap::Kem(KemAlg::MlKem768), Err(BackendError::Unsupported("no".into()))).is_none());
    assert_eq!((l.failures.len(), l.skipped.len()), (2, 1), "a true 'unsupported' is a skip");
    let empty = Ledger::default();
    let caught = std::panic::catch_unwind(|| empty.assert_clean("empty", &[&*by_name("openssl").unwrap()], |_| 1));
    assert!(caught.is_err(), "a test that checked nothing must fail");
}
