//! Correct before timed: the known-answer test and the cross-backend checks every case passes
//! before its first timing (`protocol::run` calls [`validate`]; a case that fails is reported
//! `invalid` and never timed).
//!
//! - **Known-answer test (KAT)**: the backend's primitive reproduces a published vector
//!   (sources in [`vectors`]), or, for randomised schemes, produces output that an independent
//!   check accepts, and rejects a tampered input. Post-quantum: ML-KEM decapsulates the NIST
//!   ACVP test case (and its implicit-rejection answer), encapsulates deterministically to it
//!   where the library takes the randomness m (else its encapsulation to the ACVP key must
//!   decapsulate with the ACVP key), and generates the expected keys from seeds where the
//!   library takes them; ML-DSA generates the ACVP key-generation test case's public key from
//!   its seed and verifies a fixed deterministic signature; X25519MLKEM768 is checked on the
//!   ML-KEM-768 test case joined with RFC 7748's X25519 keys. Where a library cannot take a
//!   seed, the timed (random) key generation gets a consistency check, labelled as such.
//! - **Cross-backend checks**: on the case's own message size, the output of this backend is
//!   accepted by every other real backend and the other way round: digests and MACs equal,
//!   sealed by one and opened by the other, signed by one and verified by the other, both sides
//!   of a key agreement derive the same secret, encapsulated by one and decapsulated by the
//!   other. A backend that lacks the algorithm is "skipped" with its reason.
//!
//! Everything goes through the [`Backend`] trait, so what is checked is exactly what is timed.

mod kem;
mod kx;
pub mod vectors;

pub(crate) use kx::fixed_peer;
use kem::kem_kat;
use kx::{derive_kat, kx_keygen_kat};

use crate::backends::{self, Backend, BackendError, Verifier};
use crate::ops::keys;
use crate::ops::prepare::{keygen_sig_alg, AEAD_KEY, MAC_KEY, MESSAGE_BYTE, NONCE};
use crate::ops::{KeyGenAlg, Op, Params, RsaPadding, SigAlg, SigFamily, XtsBits};

/// One cross-backend check, as reported in a `result`'s `validation.cross_checks`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CrossCheck {
    /// The other backend's name.
    pub with: String,
    /// `pass`, `fail` or `skipped` (the other backend lacks the algorithm).
    pub status: &'static str,
    /// What was checked, or why it failed or was skipped.
    pub detail: String,
}

/// The known-answer test's verdict. Serialised (and displayed) as the strings results have
/// always carried: `pass`, `fail: <why>`, `not applicable (<why>)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KatStatus {
    Pass,
    /// The backend's answer was wrong; why, in words.
    Fail(String),
    /// No known-answer test applies (a scripted test backend, a protocol workload); why.
    NotApplicable(String),
}

impl KatStatus {
    /// Whether the verdict is a failure (`NotApplicable` is not).
    pub fn failed(&self) -> bool {
        matches!(self, KatStatus::Fail(_))
    }
}

impl std::fmt::Display for KatStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KatStatus::Pass => f.write_str("pass"),
            KatStatus::Fail(why) => write!(f, "fail: {why}"),
            KatStatus::NotApplicable(why) => write!(f, "not applicable ({why})"),
        }
    }
}

impl serde::Serialize for KatStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Compares with the string a result carries (`v.kat == "pass"`).
impl PartialEq<&str> for KatStatus {
    fn eq(&self, other: &&str) -> bool {
        self.to_string() == *other
    }
}

/// Outcome of validating a case, reported in the `result` message.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Validation {
    pub kat: KatStatus,
    /// Where the known answer comes from (document and test case).
    pub kat_source: String,
    pub cross_checks: Vec<CrossCheck>,
}

impl Validation {
    /// true when the KAT passed (or is not applicable) and no cross check failed.
    pub fn passed(&self) -> bool {
        !self.kat.failed() && self.cross_checks.iter().all(|c| c.status != "fail")
    }

    /// A one-line reason when `!passed()`: the failed KAT, else the first failed cross check.
    pub fn failure(&self) -> Option<String> {
        if self.passed() {
            return None;
        }
        if self.kat.failed() {
            return Some(format!("known-answer test: {} ({})", self.kat, self.kat_source));
        }
        let c = self.cross_checks.iter().find(|c| c.status == "fail")?;
        Some(format!("cross-backend check with {}: {}", c.with, c.detail))
    }
}

/// Validate `backend` for `op` with `params` against every other real backend.
///
/// Errors: `Unsupported` when the backend lacks the operation itself (the case is then
/// reported "unsupported"); `Failed` when the library fails while its primitive is built.
/// A wrong answer is not an error: it is a failed [`Validation`].
pub fn validate(backend: &dyn Backend, op: Op, params: &Params) -> Result<Validation, BackendError> {
    let name = backend.info().backend;
    if !backends::NAMES.contains(&name) && !backends::DEVICES.contains(&name) {
        return Ok(Validation {
            kat: KatStatus::NotApplicable(format!("{name} is a scripted test backend")),
            kat_source: String::new(),
            cross_checks: vec![],
        });
    }
    let others: Vec<Box<dyn Backend>> = backends::NAMES
        .iter()
        .filter(|&&n| n != name)
        .filter_map(|n| backends::by_name(n))
        .collect();
    validate_against(backend, op, params, &others)
}

/// [`validate`] with an explicit list of backends to cross-check against (tests use it to
/// put a deliberately broken backend on either side).
pub fn validate_against(
    backend: &dyn Backend,
    op: Op,
    params: &Params,
    others: &[Box<dyn Backend>],
) -> Result<Validation, BackendError> {
    if let Some(why) = crate::fips::refusal(backend.info().backend, op, params) {
        return Err(BackendError::Unsupported(why));
    }
    let generated = match op {
        Op::Sign(_) => backend.generates_signing_keys(),
        _ => None,
    };
    let (kat_source, outcome) = match &generated {
        // A key the backend generated has no known answer: the cross-checks are the check.
        Some(_) => (String::new(), Ok(())),
        None => known_answer(backend, op, params)?,
    };
    let cross_checks: Vec<CrossCheck> = others
        .iter()
        .map(|other| {
            let with = other.info().backend.to_string();
            match cross_check(backend, &**other, op, params) {
                Ok(detail) => CrossCheck { with, status: "pass", detail },
                Err(BackendError::Unsupported(why)) => {
                    CrossCheck { with, status: "skipped", detail: why }
                }
                Err(BackendError::Failed(why)) => CrossCheck { with, status: "fail", detail: why },
            }
        })
        .collect();
    let kat = match (outcome, generated) {
        (Ok(()), None) => KatStatus::Pass,
        (Err(why), _) => KatStatus::Fail(why),
        (Ok(()), Some(_)) if !cross_checks.iter().any(|c| c.status == "pass") => {
            KatStatus::Fail("no library could check the signatures of the key the backend generated".into())
        }
        (Ok(()), Some(why)) => KatStatus::NotApplicable(why),
    };
    Ok(Validation { kat, kat_source, cross_checks })
}

/// A check's verdict: `Err` carries what went wrong, in words.
type Check = std::result::Result<(), String>;

/// `Ok` when equal, else what differs (short hex); the conformance suite uses it too.
pub(crate) fn same(what: &str, got: &[u8], want: &[u8]) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {}, expected {}", short_hex(got), short_hex(want)))
    }
}

/// Hex of at most the first 32 bytes, so a failure stays one readable line.
fn short_hex(b: &[u8]) -> String {
    if b.len() <= 32 {
        hex::encode(b)
    } else {
        format!("{}… ({} bytes)", hex::encode(&b[..32]), b.len())
    }
}

/// Bytes of a hex literal from the vectors (which are hex by construction).
pub(crate) fn unhex(h: &str) -> Vec<u8> {
    hex::decode(h).expect("vectors are valid hex")
}

/// `sig` with the lowest bit of its last byte flipped: still well-formed (DER stays DER), no
/// longer valid.
fn tampered(sig: &[u8]) -> Vec<u8> {
    let mut t = sig.to_vec();
    if let Some(last) = t.last_mut() {
        *last ^= 1;
    }
    t
}

/// `Ok` when `v` accepts `sig` for `msg` and rejects the tampered signature.
fn accepts_and_rejects(v: &mut dyn Verifier, msg: &[u8], sig: &[u8]) -> Check {
    match v.verify(msg, sig) {
        Ok(true) => {}
        Ok(false) => return Err("a valid signature did not verify".into()),
        Err(e) => return Err(format!("verifying a valid signature failed: {e}")),
    }
    match v.verify(msg, &tampered(sig)) {
        Ok(false) | Err(_) => Ok(()),
        Ok(true) => Err("a tampered signature verified".into()),
    }
}

/// The message a case processes (same bytes as `ops::prepare`), for the cross checks.
fn case_message(op: Op, params: &Params) -> Vec<u8> {
    vec![MESSAGE_BYTE; crate::ops::prepare::bytes_per_op(op, params)]
}

fn curve_bits(alg: SigAlg) -> u32 {
    match alg {
        SigAlg::EcdsaP384 { .. } => 384,
        _ => 256,
    }
}

/// Run the known-answer test of `op` on `backend`: `(source, verdict)`.
/// `Err(Unsupported)` when the backend lacks the operation.
fn known_answer(backend: &dyn Backend, op: Op, params: &Params) -> Result<(String, Check), BackendError> {
    Ok(match op {
        Op::Digest(alg) => {
            let (want, source) = vectors::digest_abc(alg);
            let mut d = backend.digest(alg)?;
            let mut out = Vec::new();
            // Twice: a reused state must be reset between calls.
            let check = (0..2).try_for_each(|_| {
                d.digest(b"abc", &mut out).map_err(|e| e.to_string())?;
                same(&format!("{} of \"abc\"", alg.name()), &out, &unhex(want))
            });
            (source.to_string(), check)
        }
        Op::Hmac(alg) => {
            let (cases, source) = vectors::hmac(alg);
            let mut check = Ok(());
            // A case whose key length the backend refuses as unsupported (a token with a
            // minimum HMAC key size) is left out, and said so; at least one case must run.
            let mut left_out = Vec::new();
            for (v, number) in cases.iter().zip([1, 2, 6]) {
                let mut m = match backend.hmac(alg, v.key) {
                    Err(BackendError::Unsupported(why)) if v.key.len() < cases[2].key.len() => {
                        left_out.push(format!("test case {number} left out: {why}"));
                        continue;
                    }
                    other => other?,
                };
                let mut out = Vec::new();
                check = check.and_then(|()| {
                    (0..2).try_for_each(|_| {
                        m.mac(v.data, &mut out).map_err(|e| e.to_string())?;
                        same(&format!("HMAC-{} test case {number}", alg.name()), &out, &unhex(v.tag))
                    })
                });
            }
            let source = if left_out.is_empty() { source.to_string() } else { format!("{source}; {}", left_out.join("; ")) };
            (source, check)
        }
        Op::Seal(alg) | Op::Open(alg) => {
            let (cases, source) = vectors::aead(alg);
            let mut check = Ok(());
            for (i, v) in cases.iter().enumerate() {
                let mut a = backend.aead(alg, &unhex(v.key))?;
                let nonce: [u8; 12] = unhex(v.nonce).try_into().expect("vector nonces are 12 bytes");
                let (aad, pt, sealed) = (unhex(v.aad), unhex(v.plaintext), unhex(v.sealed));
                let mut out = Vec::new();
                let what = format!("{} vector {}", alg.name(), i + 1);
                check = check.and_then(|()| match op {
                    Op::Seal(_) => {
                        a.seal(&nonce, &aad, &pt, &mut out).map_err(|e| format!("{what}: {e}"))?;
                        same(&what, &out, &sealed)
                    }
                    _ => {
                        a.open(&nonce, &aad, &sealed, &mut out).map_err(|e| format!("{what}: {e}"))?;
                        same(&what, &out, &pt)?;
                        match a.open(&nonce, &aad, &tampered(&sealed), &mut out) {
                            Err(_) => Ok(()),
                            Ok(()) => Err(format!("{what}: a tampered tag was accepted")),
                        }
                    }
                });
            }
            (source.to_string(), check)
        }
        Op::Sign(family) => sign_kat(backend, params.sig_alg(family), family)?,
        Op::Verify(family) => verify_kat(backend, params.sig_alg(family), family)?,
        Op::Derive(alg) => derive_kat(backend, alg, false)?,
        Op::DeriveValidated(alg) => derive_kat(backend, alg, true)?,
        Op::Encaps(alg) | Op::Decaps(alg) | Op::Keygen(KeyGenAlg::Kem(alg)) => {
            kem_kat(backend, op, alg)?
        }
        Op::Keygen(KeyGenAlg::Kx(alg)) => kx_keygen_kat(backend, alg)?,
        Op::Keygen(KeyGenAlg::Sig(family)) => sig_keygen_kat(backend, keygen_sig_alg(family))?,
    })
}

/// The known-answer test of `backend`'s XTS-AES at `bits` ([`vectors::xts`], IEEE Std
/// 1619-2007 Annex B): each vector's plaintext encrypts to its ciphertext in place, decrypts
/// back, and encrypts again to the same bytes on the same cipher (the timed loop reuses one).
/// Returns `(source, verdict)`; the verdict's `Err` says which vector differed and how.
///
/// Errors: `Unsupported` when the backend lacks the key size; `Failed` when it cannot take a
/// vector's key.
pub fn xts_known_answer(backend: &dyn Backend, bits: XtsBits) -> Result<(String, std::result::Result<(), String>), BackendError> {
    let (cases, source) = vectors::xts(bits);
    let mut check = Ok(());
    for (i, v) in cases.iter().enumerate() {
        let mut x = backend.xts(bits, &unhex(v.key))?;
        let (pt, ct) = (unhex(v.plaintext), unhex(v.ciphertext));
        let what = format!("{} vector {} ({} bytes, sector {:#x})", bits.name(), i + 1, pt.len(), v.sector);
        check = check.and_then(|()| {
            let mut buf = pt.clone();
            x.encrypt_sector(v.sector, &mut buf).map_err(|e| format!("{what}: {e}"))?;
            same(&format!("{what}: encrypted"), &buf, &ct)?;
            x.decrypt_sector(v.sector, &mut buf).map_err(|e| format!("{what}: {e}"))?;
            same(&format!("{what}: decrypted"), &buf, &pt)?;
            x.encrypt_sector(v.sector, &mut buf).map_err(|e| format!("{what}: {e}"))?;
            same(&format!("{what}: encrypted again"), &buf, &ct)
        });
    }
    Ok((source.to_string(), check))
}

fn sign_kat(backend: &dyn Backend, alg: SigAlg, family: SigFamily) -> Result<(String, Check), BackendError> {
    let key = keys::signing_key(family);
    let mut signer = backend.signer(alg, &key)?;
    let deterministic = match alg {
        SigAlg::Ed25519 => {
            Some(("RFC 8032 §7.1 TEST 1".to_string(), b"".as_slice(), unhex(vectors::ED25519_TEST1_SIG)))
        }
        SigAlg::Rsa { bits, digest, padding: RsaPadding::Pkcs1 } => Some((
            vectors::COMPUTED_SIG_SOURCE.to_string(),
            b"abc".as_slice(),
            vectors::rsa_abc(bits, digest, RsaPadding::Pkcs1).expect("a vector for every RSA key and digest"),
        )),
        _ => None,
    };
    if let Some((source, msg, want)) = deterministic {
        let check = signer
            .sign(msg)
            .map_err(|e| e.to_string())
            .and_then(|sig| same("signature", &sig, &want));
        return Ok((source, check));
    }
    // Randomised (RSA-PSS, ECDSA): no fixed answer, so the signature must verify under the
    // fixed public key with an independent verifier (another backend where there is one), and
    // that verifier must reject the signature once tampered.
    let own_name = backend.info().backend;
    let verifier = backends::NAMES
        .iter()
        .filter(|&&n| n != own_name)
        .filter_map(|n| backends::by_name(n))
        .find_map(|b| b.verifier(alg, key.public).ok().map(|v| (b.info().backend, v)));
    let (by, mut v) = match verifier {
        Some(found) => found,
        None => (own_name, backend.verifier(alg, key.public)?),
    };
    let check = signer
        .sign(b"abc")
        .map_err(|e| e.to_string())
        .and_then(|sig| accepts_and_rejects(&mut *v, b"abc", &sig));
    Ok((
        format!("randomised scheme: a signature of \"abc\" must verify with the {by} backend under the fixed public key"),
        check,
    ))
}

fn verify_kat(backend: &dyn Backend, alg: SigAlg, family: SigFamily) -> Result<(String, Check), BackendError> {
    let key = keys::signing_key(family);
    let mut v = backend.verifier(alg, key.public)?;
    Ok(match alg {
        SigAlg::Ed25519 => (
            "RFC 8032 §7.1 TEST 1".into(),
            accepts_and_rejects(&mut *v, b"", &unhex(vectors::ED25519_TEST1_SIG)),
        ),
        SigAlg::Rsa { bits, digest, padding } => (
            vectors::COMPUTED_SIG_SOURCE.into(),
            accepts_and_rejects(
                &mut *v,
                b"abc",
                &vectors::rsa_abc(bits, digest, padding).expect("a vector for every RSA key, padding and digest"),
            ),
        ),
        SigAlg::MlDsa(level) => {
            let vector = vectors::ml_dsa(level);
            (
                format!("{} (key: {})", vectors::ML_DSA_SIG_SOURCE, vector.keygen_source),
                accepts_and_rejects(&mut *v, b"abc", &vector.sig_abc),
            )
        }
        SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest } => {
            let bits = curve_bits(alg);
            let computed = vectors::ecdsa_abc(bits, digest).expect("a vector for every curve and digest");
            let mut check = accepts_and_rejects(&mut *v, b"abc", &computed);
            let mut source = vectors::COMPUTED_SIG_SOURCE.to_string();
            if let Some(rfc) = vectors::rfc6979(bits, digest) {
                let mut rv = backend.verifier(alg, &unhex(rfc.public))?;
                check = check.and_then(|()| accepts_and_rejects(&mut *rv, rfc.msg, &unhex(rfc.sig_der)));
                source = format!("RFC 6979 A.2.{}, and {source}", if bits == 256 { 5 } else { 6 });
            }
            (source, check)
        }
    })
}

/// SHA-256, for comparing big outputs with the digests in the vector files.
fn sha256(data: &[u8]) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(data).to_vec()
}

/// `Ok` when `got` has the length `want`.
fn length(what: &str, got: usize, want: usize) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what} is {got} bytes, expected {want}"))
    }
}

/// The first backend other than `backend` that `make` succeeds on, else `backend` itself:
/// an independent implementation where one exists.
fn independent<T>(
    backend: &dyn Backend,
    make: impl Fn(&dyn Backend) -> Result<T, BackendError>,
) -> Result<(&'static str, T), BackendError> {
    let own = backend.info().backend;
    for name in backends::NAMES.iter().filter(|&&n| n != own) {
        if let Some(other) = backends::by_name(name) {
            if let Ok(t) = make(&*other) {
                return Ok((other.info().backend, t));
            }
        }
    }
    Ok((own, make(backend)?))
}

/// ML-DSA key generation: the ACVP test case's public key from its seed where the library takes
/// a seed, and a randomly generated key (the timed path) whose signature an independent
/// verifier accepts under its public key.
fn sig_keygen_kat(backend: &dyn Backend, alg: SigAlg) -> Result<(String, Check), BackendError> {
    let SigAlg::MlDsa(level) = alg else {
        unreachable!("only ML-DSA has a -keygen operation")
    };
    let v = vectors::ml_dsa(level);
    let mut generated = backend.sig_keygen(alg, None)?;
    let public = generated.public.clone();
    let (by, mut verifier) = independent(backend, |o| o.verifier(alg, &public))?;
    let check = (|| {
        length("generated public key", public.len(), level.lens().0)?;
        let sig = generated.signer.sign(b"abc").map_err(|e| e.to_string())?;
        length("signature", sig.len(), level.lens().1)?;
        accepts_and_rejects(&mut *verifier, b"abc", &sig)
    })();
    Ok(match backend.sig_keygen(alg, Some(&v.seed)) {
        Ok(seeded) => (
            format!(
                "{} (public key from the seed), and a generated key's signature verified by the {by} backend",
                v.keygen_source
            ),
            same("public key", &seeded.public, &v.pk).and(check),
        ),
        Err(BackendError::Unsupported(why)) => (
            format!("consistency check, not a known answer ({why}): a generated key's signature verified by the {by} backend"),
            check,
        ),
        Err(e) => return Err(e),
    })
}

/// Check `backend` against `other` on the case's own message. `Ok(what was checked)`;
/// `Err(Unsupported)` when `other` lacks the algorithm; `Err(Failed)` on any disagreement.
fn cross_check(backend: &dyn Backend, other: &dyn Backend, op: Op, params: &Params) -> Result<String, BackendError> {
    if let Some(why) = crate::fips::refusal(other.info().backend, op, params) {
        return Err(BackendError::Unsupported(why));
    }
    let msg = case_message(op, params);
    let fail = |what: String| Err(BackendError::Failed(what));
    let agree = |what: &str, ours: &[u8], theirs: &[u8]| match same(what, ours, theirs) {
        Ok(()) => Ok(format!("{what} agree")),
        Err(why) => Err(BackendError::Failed(why)),
    };
    match op {
        Op::Digest(alg) => {
            let (mut theirs, mut a, mut b) = (other.digest(alg)?, Vec::new(), Vec::new());
            backend.digest(alg)?.digest(&msg, &mut a)?;
            theirs.digest(&msg, &mut b)?;
            agree(&format!("{}-byte digests", msg.len()), &a, &b)
        }
        Op::Hmac(alg) => {
            let (mut theirs, mut a, mut b) = (other.hmac(alg, &MAC_KEY)?, Vec::new(), Vec::new());
            backend.hmac(alg, &MAC_KEY)?.mac(&msg, &mut a)?;
            theirs.mac(&msg, &mut b)?;
            agree(&format!("{}-byte MACs", msg.len()), &a, &b)
        }
        Op::Seal(alg) | Op::Open(alg) => {
            let key = &AEAD_KEY[..alg.key_len()];
            let (mut theirs, mut ours) = (other.aead(alg, key)?, backend.aead(alg, key)?);
            let (sealer, opener): (&mut dyn backends::Aead, &mut dyn backends::Aead) = match op {
                Op::Seal(_) => (&mut *ours, &mut *theirs),
                _ => (&mut *theirs, &mut *ours),
            };
            let (mut sealed, mut opened) = (Vec::new(), Vec::new());
            sealer.seal(&NONCE, b"aad", &msg, &mut sealed)?;
            if let Err(e) = opener.open(&NONCE, b"aad", &sealed, &mut opened) {
                return fail(format!("{}-byte message sealed by one did not open with the other: {e}", msg.len()));
            }
            agree(&format!("{}-byte plaintexts after seal and open", msg.len()), &opened, &msg)
        }
        Op::Sign(family) | Op::Verify(family) => {
            let alg = params.sig_alg(family);
            let key = keys::signing_key(family);
            let (mut signer, mut verifier) = match op {
                Op::Sign(_) => {
                    let (signer, public) = backends::signing_pair(backend, alg, &key)?;
                    (signer, other.verifier(alg, &public)?)
                }
                _ => (other.signer(alg, &key)?, backend.verifier(alg, key.public)?),
            };
            let sig = signer.sign(&msg)?;
            match accepts_and_rejects(&mut *verifier, &msg, &sig) {
                Ok(()) => Ok(format!("{}-byte message signed by one verifies with the other", msg.len())),
                Err(why) => fail(why),
            }
        }
        Op::Derive(alg) | Op::DeriveValidated(alg) => {
            let (mut ours, mut theirs) = match keys::agreement_keys(alg) {
                Some((ours, peer)) => (backend.agreement(alg, Some(&ours))?, other.agreement(alg, Some(&peer))?),
                None => (backend.agreement(alg, None)?, other.agreement(alg, None)?),
            };
            let a = match op {
                Op::DeriveValidated(_) => ours.derive_validated(&theirs.public_key())?,
                _ => ours.derive(&theirs.public_key())?,
            };
            let b = theirs.derive_validated(&ours.public_key())?;
            agree("shared secrets of both sides (each validating the other's public key)", &a, &b)
        }
        Op::Keygen(KeyGenAlg::Kem(alg)) => {
            let mut ours = backend.kem_keypair(alg)?;
            let (ct, ss) = other.kem_encapsulator(alg, &ours.encapsulation_key())?.encaps()?;
            agree("a generated key's decapsulation of the other's encapsulation, and its secret", &ours.decaps(&ct)?, &ss)
        }
        Op::Keygen(KeyGenAlg::Sig(family)) => {
            let alg = keygen_sig_alg(family);
            let mut ours = backend.sig_keygen(alg, None)?;
            let mut verifier = other.verifier(alg, &ours.public)?;
            let sig = ours.signer.sign(b"abc")?;
            match accepts_and_rejects(&mut *verifier, b"abc", &sig) {
                Ok(()) => Ok("a generated key's signature verifies with the other under its public key".into()),
                Err(why) => fail(why),
            }
        }
        Op::Keygen(KeyGenAlg::Kx(alg)) => {
            let ours = backend.key_share(alg)?;
            let mut theirs = fixed_peer(other, alg)?;
            let b = theirs.derive_validated(ours.public_key())?;
            let a = ours.derive(&theirs.public_key())?;
            agree("a generated key's shared secrets with the other's key on both sides", &a, &b)
        }
        Op::Encaps(alg) | Op::Decaps(alg) => {
            let (decapsulator, encapsulating) = match op {
                Op::Encaps(_) => (other.kem_keypair(alg)?, backend),
                _ => (backend.kem_keypair(alg)?, other),
            };
            let mut decapsulator = decapsulator;
            let (ct, ss) = encapsulating.kem_encapsulator(alg, &decapsulator.encapsulation_key())?.encaps()?;
            agree("encapsulated and decapsulated secrets", &decapsulator.decaps(&ct)?, &ss)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod wycheproof;
