//! Wycheproof test vectors (C2SP/wycheproof, <https://github.com/C2SP/wycheproof>) run through
//! the [`Backend`] trait on every backend of the conformance suite
//! (`crate::backends::conformance`).
//!
//! The vectors come from the `wycheproof` crate, pinned in Cargo.toml (0.7.0, whose `src/data`
//! holds the upstream repository's JSON files as of 2026-09-10, per the crate's NEWS.md), read
//! with its deserialisers (hex already decoded). Each file's rule:
//!
//! - a backend that has the algorithm must accept every `valid` vector (with the expected
//!   output where there is one) and reject every `invalid` one; an `acceptable` vector may go
//!   either way, but if accepted its output must be the expected one;
//! - a vector whose shape the trait cannot express (an AEAD IV other than 12 bytes or a tag
//!   other than 16, an AES key of 192 bits, an ML-DSA context string, an ML-KEM seed that is
//!   not 64 bytes) is skipped and counted, never passed;
//! - a backend that lacks the algorithm (the conformance suite's support table says so, and
//!   the backend says "unsupported") skips the whole file, counted; at least one other backend
//!   must then have checked it;
//! - every backend that has the algorithm checked exactly the vectors not skipped for shape;
//! - a vector a backend gets wrong for a documented cause (only RustCrypto's ML-KEM input
//!   checks, [`kem_deviation`]) is listed as a known deviation: checked, never counted as passed,
//!   and the test fails once the backend conforms, so the list cannot go stale.
//!
//! Public keys go in through the trait's own import paths: RSA as PKCS#1 `RSAPublicKey` DER
//! (Wycheproof's `publicKeyAsn`), EC as the SEC1 uncompressed point, Ed25519, X25519 and ML-DSA
//! as raw bytes, ML-KEM as FIPS 203 encodings: no test-only import code was needed.

use std::collections::BTreeMap;

use wycheproof::TestResult;

use crate::backends::conformance::{subjects, supports, Cap, Ledger};
use crate::backends::{Backend, BackendError};
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KemAlg, KxAlg, MlDsaLevel, RsaPadding, SigAlg};

/// One backend's answer to one vector.
enum Outcome {
    /// The vector was checked: `Ok`, or what was wrong.
    Checked(std::result::Result<(), String>),
    /// The backend cannot take this vector (the reason is counted).
    Skipped(String),
}

/// What a backend did with a vector's input.
enum Answer {
    /// It took the input and answered: `Ok` when its output is the vector's, else what differs.
    /// (An invalid vector has no expected output: taking it at all is the failure.)
    Accepted(std::result::Result<(), String>),
    /// It refused the input: an error, or "not valid".
    Rejected(String),
}

/// The verdict on one vector: valid ones must be accepted with the expected output, invalid ones
/// refused, acceptable ones either refused or answered correctly.
fn judge(expected: TestResult, got: Answer) -> std::result::Result<(), String> {
    match (expected, got) {
        (TestResult::Valid, Answer::Accepted(Ok(()))) => Ok(()),
        (TestResult::Valid, Answer::Accepted(Err(why))) => Err(format!("valid vector answered wrongly: {why}")),
        (TestResult::Valid, Answer::Rejected(why)) => Err(format!("valid vector rejected: {why}")),
        (TestResult::Invalid, Answer::Accepted(_)) => Err("invalid vector accepted".into()),
        (TestResult::Invalid, Answer::Rejected(_)) => Ok(()),
        (TestResult::Acceptable, Answer::Accepted(Err(why))) => {
            Err(format!("acceptable vector accepted with a wrong answer: {why}"))
        }
        (TestResult::Acceptable, _) => Ok(()),
    }
}

/// What one file's run found, per backend.
pub(crate) struct FileReport {
    pub file: &'static str,
    pub total: usize,
    /// Vectors a backend answers against Wycheproof for a known, documented cause
    /// ([`kem_deviation`]): checked, not passed, and listed.
    pub deviations: BTreeMap<String, Vec<usize>>,
    /// Vectors no backend can take through the trait, with the reason.
    pub shape_skips: BTreeMap<String, usize>,
    pub ledger: Ledger,
}

impl FileReport {
    /// One line per backend: vectors checked and skipped.
    pub fn summary(&self) -> String {
        let mut s = format!("{} ({} vectors", self.file, self.total);
        for (why, n) in &self.shape_skips {
            s += &format!("; {n} skipped for every backend: {why}");
        }
        s += ")";
        let mut names: Vec<&String> = self.ledger.checked.keys().collect();
        for (who, _, _) in &self.ledger.skipped {
            if !names.contains(&who) {
                names.push(who);
            }
        }
        for who in names {
            let skipped = self.ledger.skipped.iter().filter(|s| &s.0 == who).count();
            s += &format!("\n  {who}: {} checked, {skipped} skipped", self.ledger.checked_by(who));
            if let Some(ids) = self.deviations.get(who.as_str()) {
                s += &format!(", {} of the checked are known deviations (tcId {})", ids.len(), ranges(ids));
            }
            if let Some((_, _, why)) = self.ledger.skipped.iter().find(|s| &s.0 == who) {
                s += &format!(" ({why})");
            }
        }
        s
    }

    /// Panic unless every backend accepted what is valid and rejected what is invalid, every
    /// backend with the algorithm checked every vector not skipped for shape, and at least one
    /// backend checked the file.
    pub fn assert_clean(&self, cap: Cap, subjects: &[&dyn Backend]) {
        let l = &self.ledger;
        assert!(l.failures.is_empty(), "{}: {} failure(s):\n  {}", self.file, l.failures.len(), l.failures.join("\n  "));
        let shape: usize = self.shape_skips.values().sum();
        let mut checked_somewhere = false;
        for b in subjects {
            let who = b.info().backend;
            if supports(who, cap) == Some(true) {
                // Every vector the trait can take was checked, or skipped one by one for a
                // reason of this backend's API (ML-KEM encapsulation without m).
                let skipped = l.skipped.iter().filter(|s| s.0 == who).count();
                assert_eq!(l.checked_by(who) + skipped, self.total - shape, "{}: {who} checked {} and skipped {skipped} of {} vectors\n{}", self.file, l.checked_by(who), self.total - shape, self.summary());
                assert!(l.checked_by(who) > 0, "{}: {who} checked nothing\n{}", self.file, self.summary());
                checked_somewhere = true;
            }
        }
        // In the FIPS build, a file only backends without FIPS mode can take is left to the
        // default build.
        let any_subject_has_it = subjects.iter().any(|b| supports(b.info().backend, cap) == Some(true));
        assert!(checked_somewhere || !any_subject_has_it, "{}: no backend checked it", self.file);
        assert!(self.total > shape, "{}: every vector was skipped for shape", self.file);
    }
}

/// A Wycheproof test, as far as the runner needs to know it.
trait Vector {
    fn tc_id(&self) -> usize;
}

impl Vector for wycheproof::xdh::Test {
    fn tc_id(&self) -> usize {
        self.tc_id
    }
}

impl Vector for wycheproof::mlkem::Test {
    fn tc_id(&self) -> usize {
        self.tc_id
    }
}

/// `[2, 3, 4, 9]` as `2-4, 9`.
fn ranges(ids: &[usize]) -> String {
    let mut out: Vec<String> = vec![];
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j { ids[i].to_string() } else { format!("{}-{}", ids[i], ids[j]) });
        i = j + 1;
    }
    out.join(", ")
}

/// Run `one` for every subject on every vector of a file. `shape` says why a vector cannot be
/// put through the trait at all; `one` answers `Err(Unsupported)` when the backend lacks the
/// algorithm (then the support table must agree, and the file is skipped for it).
fn run_file<T: Vector>(
    file: &'static str,
    cap: Cap,
    subjects: &[&dyn Backend],
    vectors: &[T],
    shape: impl Fn(&T) -> Option<String>,
    one: impl Fn(&dyn Backend, &T) -> Result<Outcome, BackendError>,
    deviation: impl Fn(&str, &T) -> Option<&'static str>,
) -> FileReport {
    let mut report = FileReport { file, total: vectors.len(), deviations: BTreeMap::new(), shape_skips: BTreeMap::new(), ledger: Ledger::default() };
    for v in vectors {
        if let Some(why) = shape(v) {
            *report.shape_skips.entry(why).or_default() += 1;
        }
    }
    for &b in subjects {
        let who = b.info().backend;
        for v in vectors.iter().filter(|v| shape(v).is_none()) {
            let what = format!("{file} tcId {}", v.tc_id());
            match one(b, v) {
                Ok(Outcome::Checked(r)) => match (r, deviation(who, v)) {
                    (r, None) => report.ledger.check(who, &what, r),
                    (Err(_), Some(_)) => {
                        // Checked, and wrong for the documented cause: listed, never passed.
                        *report.ledger.checked.entry(who.into()).or_default() += 1;
                        report.deviations.entry(who.into()).or_default().push(v.tc_id());
                    }
                    (Ok(()), Some(cause)) => report.ledger.check(who, &what, Err(format!(
                        "listed as a known deviation ({cause}) but it now conforms: take it off the list"
                    ))),
                },
                Ok(Outcome::Skipped(why)) => report.ledger.skip(who, &what, why),
                Err(e) => {
                    // Through the table: a true "unsupported" skips the file for this backend.
                    if report.ledger.have::<()>(b, cap, Err(e)).is_none() && supports(who, cap) != Some(true) {
                        let n = vectors.iter().filter(|v| shape(v).is_none()).count();
                        let why = report.ledger.skipped.pop().map(|s| s.2).unwrap_or_default();
                        for _ in 0..n {
                            report.ledger.skip(who, file, &why);
                        }
                    }
                    break;
                }
            }
        }
    }
    report
}

fn subject_refs() -> Vec<Box<dyn Backend>> {
    subjects()
}

/// Run a file's check on this build's subjects, print its summary, and assert it clean.
fn check_file(cap: Cap, run: impl Fn(&[&dyn Backend]) -> FileReport) -> FileReport {
    let owned = subject_refs();
    let s: Vec<&dyn Backend> = owned.iter().map(|b| &**b).collect();
    let report = run(&s);
    println!("{}", report.summary());
    report.assert_clean(cap, &s);
    report
}

// ---- signatures ------------------------------------------------------------------------------

/// A signature vector: the group's key, the message, the signature, the expected result.
pub(crate) struct SigVector {
    pub tc_id: usize,
    pub public: Vec<u8>,
    pub msg: Vec<u8>,
    pub sig: Vec<u8>,
    pub result: TestResult,
    /// Why the trait cannot take it, if it cannot.
    pub shape: Option<String>,
}

impl Vector for SigVector {
    fn tc_id(&self) -> usize {
        self.tc_id
    }
}

/// Verify one signature vector: rejection at key import counts as rejection (an invalid
/// vector's key may be what is wrong); a valid vector must import and verify.
fn verify_one(b: &dyn Backend, alg: SigAlg, v: &SigVector) -> Result<Outcome, BackendError> {
    let got = match b.verifier(alg, &v.public) {
        Err(BackendError::Unsupported(why)) => return Err(BackendError::Unsupported(why)),
        Err(BackendError::Failed(e)) => Answer::Rejected(format!("key refused: {e}")),
        Ok(mut verifier) => match verifier.verify(&v.msg, &v.sig) {
            Ok(true) => Answer::Accepted(Ok(())),
            Ok(false) => Answer::Rejected("signature not valid".into()),
            Err(e) => Answer::Rejected(format!("verification failed: {e}")),
        },
    };
    Ok(Outcome::Checked(judge(v.result, got)))
}

pub(crate) fn run_sig_file(file: &'static str, alg: SigAlg, subjects: &[&dyn Backend], vectors: &[SigVector]) -> FileReport {
    run_file(file, Cap::Verify(alg), subjects, vectors, |v| v.shape.clone(), |b, v| verify_one(b, alg, v), |_, _| None)
}

fn digest_of(h: wycheproof::HashFunction) -> DigestAlg {
    match h {
        wycheproof::HashFunction::Sha1 => DigestAlg::Sha1,
        wycheproof::HashFunction::Sha2_256 => DigestAlg::Sha256,
        wycheproof::HashFunction::Sha2_384 => DigestAlg::Sha384,
        wycheproof::HashFunction::Sha2_512 => DigestAlg::Sha512,
        wycheproof::HashFunction::Sha3_256 => DigestAlg::Sha3_256,
        other => panic!("no cryptoperf digest for {other:?}"),
    }
}

fn ecdsa_vectors(name: wycheproof::ecdsa::TestName) -> (SigAlg, Vec<SigVector>) {
    let set = wycheproof::ecdsa::TestSet::load(name).expect("the crate's ECDSA vectors parse");
    let mut alg = None;
    let mut out = vec![];
    for g in set.test_groups {
        let digest = digest_of(g.hash);
        let this = match g.key.curve {
            wycheproof::EllipticCurve::Secp256r1 => SigAlg::EcdsaP256 { digest },
            wycheproof::EllipticCurve::Secp384r1 => SigAlg::EcdsaP384 { digest },
            other => panic!("not a cryptoperf curve: {other:?}"),
        };
        assert!(alg.is_none_or(|a| a == this), "one scheme per file");
        alg = Some(this);
        for t in g.tests {
            out.push(SigVector { tc_id: t.tc_id, public: g.key.key.to_vec(), msg: t.msg.to_vec(), sig: t.sig.to_vec(), result: t.result, shape: None });
        }
    }
    (alg.expect("a test group"), out)
}

fn rsa_pkcs1_vectors(name: wycheproof::rsa_pkcs1_verify::TestName) -> (SigAlg, Vec<SigVector>) {
    let set = wycheproof::rsa_pkcs1_verify::TestSet::load(name).expect("the crate's RSA vectors parse");
    let mut alg = None;
    let mut out = vec![];
    for g in set.test_groups {
        let this = SigAlg::Rsa { bits: g.key_size as u32, digest: digest_of(g.hash), padding: RsaPadding::Pkcs1 };
        assert!(alg.is_none_or(|a| a == this), "one scheme per file");
        alg = Some(this);
        for t in g.tests {
            out.push(SigVector { tc_id: t.tc_id, public: g.asn_key.to_vec(), msg: t.msg.to_vec(), sig: t.sig.to_vec(), result: t.result, shape: None });
        }
    }
    (alg.expect("a test group"), out)
}

fn rsa_pss_vectors(name: wycheproof::rsa_pss_verify::TestName) -> (SigAlg, Vec<SigVector>) {
    let set = wycheproof::rsa_pss_verify::TestSet::load(name).expect("the crate's RSA-PSS vectors parse");
    let mut alg = None;
    let mut out = vec![];
    for g in set.test_groups {
        let digest = digest_of(g.hash);
        // cryptoperf's PSS is MGF1 with the message digest and a salt of the digest's length
        // (RFC 8017 §9.1, as TLS 1.3 uses it): only such files are run.
        assert_eq!(g.mgf, wycheproof::Mgf::Mgf1);
        assert_eq!(g.mgf_hash.map(digest_of), Some(digest));
        assert_eq!(g.salt_size, digest.output_len());
        let this = SigAlg::Rsa { bits: g.key_size as u32, digest, padding: RsaPadding::Pss };
        assert!(alg.is_none_or(|a| a == this), "one scheme per file");
        alg = Some(this);
        for t in g.tests {
            out.push(SigVector { tc_id: t.tc_id, public: g.asn_key.to_vec(), msg: t.msg.to_vec(), sig: t.sig.to_vec(), result: t.result, shape: None });
        }
    }
    (alg.expect("a test group"), out)
}

fn ed25519_vectors() -> Vec<SigVector> {
    let set = wycheproof::eddsa::TestSet::load(wycheproof::eddsa::TestName::Ed25519).expect("the crate's EdDSA vectors parse");
    set.test_groups
        .into_iter()
        .flat_map(|g| {
            let pk = g.key.pk.to_vec();
            g.tests.into_iter().map(move |t| SigVector { tc_id: t.tc_id, public: pk.clone(), msg: t.msg.to_vec(), sig: t.sig.to_vec(), result: t.result, shape: None })
        })
        .collect()
}

fn ml_dsa_vectors(name: wycheproof::mldsa_verify::TestName) -> Vec<SigVector> {
    let set = wycheproof::mldsa_verify::TestSet::load(name).expect("the crate's ML-DSA vectors parse");
    set.test_groups
        .into_iter()
        .flat_map(|g| {
            let pk = g.pubkey.to_vec();
            g.tests.into_iter().map(move |t| SigVector {
                tc_id: t.tc_id,
                public: pk.clone(),
                msg: t.msg.to_vec(),
                sig: t.sig.to_vec(),
                result: t.result,
                // The trait verifies pure ML-DSA with the empty context (FIPS 204 Algorithm 3,
                // as TLS uses it): a vector with a context string cannot be put through it.
                shape: t.ctx.as_ref().filter(|c| !c.is_empty()).map(|_| "a non-empty ML-DSA context (the trait verifies with the empty one)".to_string()),
            })
        })
        .collect()
}

// ---- AEADs -----------------------------------------------------------------------------------

pub(crate) struct AeadVector {
    pub tc_id: usize,
    pub alg: Option<AeadAlg>,
    pub key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub aad: Vec<u8>,
    pub pt: Vec<u8>,
    /// ciphertext || tag
    pub sealed: Vec<u8>,
    pub tag_len: usize,
    pub result: TestResult,
}

impl Vector for AeadVector {
    fn tc_id(&self) -> usize {
        self.tc_id
    }
}

fn aead_vectors(name: wycheproof::aead::TestName) -> Vec<AeadVector> {
    let set = wycheproof::aead::TestSet::load(name).expect("the crate's AEAD vectors parse");
    let chacha = name == wycheproof::aead::TestName::ChaCha20Poly1305;
    let mut out = vec![];
    for g in set.test_groups {
        let alg = match (chacha, g.key_size) {
            (true, 256) => Some(AeadAlg::ChaCha20Poly1305),
            (false, 128) => Some(AeadAlg::Aes128Gcm),
            (false, 256) => Some(AeadAlg::Aes256Gcm),
            _ => None,
        };
        for t in g.tests {
            let sealed = [t.ct.as_slice(), t.tag.as_slice()].concat();
            out.push(AeadVector { tc_id: t.tc_id, alg, key: t.key.to_vec(), nonce: t.nonce.to_vec(), aad: t.aad.to_vec(), pt: t.pt.to_vec(), sealed, tag_len: g.tag_size / 8, result: t.result });
        }
    }
    out
}

fn aead_shape(v: &AeadVector) -> Option<String> {
    if v.alg.is_none() {
        return Some(format!("a {}-bit key (cryptoperf has AES-128 and AES-256)", v.key.len() * 8));
    }
    if v.nonce.len() != AeadAlg::NONCE_LEN {
        return Some("an IV other than 12 bytes (the trait takes 12)".into());
    }
    if v.tag_len != AeadAlg::TAG_LEN {
        return Some("a tag other than 16 bytes (the trait appends 16)".into());
    }
    None
}

/// A valid vector seals to exactly its ciphertext and tag and opens to its plaintext; an
/// invalid one (a modified tag or ciphertext) does not open.
fn aead_one(b: &dyn Backend, v: &AeadVector) -> Result<Outcome, BackendError> {
    let alg = v.alg.expect("shape-checked");
    let nonce: [u8; 12] = v.nonce.as_slice().try_into().expect("shape-checked");
    let mut a = match b.aead(alg, &v.key) {
        Err(BackendError::Unsupported(why)) => return Err(BackendError::Unsupported(why)),
        Err(BackendError::Failed(e)) => return Ok(Outcome::Checked(judge(v.result, Answer::Rejected(format!("key refused: {e}"))))),
        Ok(a) => a,
    };
    let mut out = Vec::new();
    let opened = match a.open(&nonce, &v.aad, &v.sealed, &mut out) {
        Err(e) => Answer::Rejected(e.to_string()),
        Ok(()) if out == v.pt => Answer::Accepted(Ok(())),
        Ok(()) => Answer::Accepted(Err(format!("opened to {} bytes that are not the plaintext", out.len()))),
    };
    let mut verdict = judge(v.result, opened);
    if v.result == TestResult::Valid {
        let sealed = a.seal(&nonce, &v.aad, &v.pt, &mut out).map_err(|e| e.to_string());
        verdict = verdict.and(sealed.and_then(|()| if out == v.sealed { Ok(()) } else { Err("sealed to other bytes than the vector's".into()) }));
    }
    Ok(Outcome::Checked(verdict))
}

fn run_aead_file(file: &'static str, name: wycheproof::aead::TestName, cap: Cap, subjects: &[&dyn Backend]) -> FileReport {
    let vectors = aead_vectors(name);
    run_file(file, cap, subjects, &vectors, aead_shape, aead_one, |_, _| None)
}

// ---- X25519 ----------------------------------------------------------------------------------

fn x25519_one(b: &dyn Backend, t: &wycheproof::xdh::Test) -> Result<Outcome, BackendError> {
    let ours = KeyPair { private_pkcs8: &[], private_raw: &t.private_key, public: &[] };
    let got = match b.agreement(KxAlg::X25519, Some(&ours)) {
        Err(BackendError::Unsupported(why)) => return Err(BackendError::Unsupported(why)),
        Err(BackendError::Failed(e)) => Answer::Rejected(format!("private key refused: {e}")),
        Ok(mut a) => match a.derive(&t.public_key) {
            Err(e) => Answer::Rejected(e.to_string()),
            Ok(s) if s == *t.shared_secret => Answer::Accepted(Ok(())),
            Ok(s) => Answer::Accepted(Err(format!("shared secret {} is not {}", hex::encode(&s), hex::encode(&*t.shared_secret)))),
        },
    };
    // "acceptable" (low-order and twist points): refusing is fine, a wrong secret is not.
    Ok(Outcome::Checked(judge(t.result, got)))
}

// ---- ML-KEM ----------------------------------------------------------------------------------

fn kem_of(p: wycheproof::mlkem::MlKemParameterSet) -> KemAlg {
    match p {
        wycheproof::mlkem::MlKemParameterSet::MlKem512 => KemAlg::MlKem512,
        wycheproof::mlkem::MlKemParameterSet::MlKem768 => KemAlg::MlKem768,
        wycheproof::mlkem::MlKemParameterSet::MlKem1024 => KemAlg::MlKem1024,
    }
}

fn bytes(b: &Option<wycheproof::ByteString>) -> &[u8] {
    b.as_ref().map(|b| b.as_slice()).unwrap_or(&[])
}

fn eq(what: &str, got: &[u8], want: &[u8]) -> std::result::Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what} differs"))
    }
}

/// The seed of ML-KEM.KeyGen_internal as d || z, when it is 64 bytes.
fn seed_halves(seed: &[u8]) -> Option<([u8; 32], [u8; 32])> {
    (seed.len() == 64).then(|| (seed[..32].try_into().expect("32"), seed[32..].try_into().expect("32")))
}

/// Which ML-KEM file shape a test comes from.
#[derive(Clone, Copy, PartialEq)]
enum KemFile {
    /// `mlkem_*_test.json`: key generation from a seed, then decapsulation.
    SeedDecaps,
    /// `mlkem_*_encaps_test.json`: encapsulation with m to ek (invalid: ek not reduced or of the
    /// wrong length).
    Encaps,
    /// `mlkem_*_keygen_seed_test.json`: key generation from a seed.
    KeyGen,
    /// `mlkem_*_semi_expanded_decaps_test.json`: decapsulation with an imported dk.
    Decaps,
}

fn kem_shape(file: KemFile, t: &wycheproof::mlkem::Test) -> Option<String> {
    match file {
        KemFile::SeedDecaps | KemFile::KeyGen if seed_halves(bytes(&t.seed)).is_none() => {
            Some("a seed that is not 64 bytes (the trait takes d and z as 32-byte arrays)".into())
        }
        _ => None,
    }
}

fn kem_one(b: &dyn Backend, alg: KemAlg, file: KemFile, t: &wycheproof::mlkem::Test) -> Result<Outcome, BackendError> {
    let (ek, c, k) = (bytes(&t.encaps_key), bytes(&t.ct), bytes(&t.shared_secret));
    // A refusal at any step is a rejection; "unsupported" skips the file (through the table).
    let refused = |what: &str, e: BackendError| match e {
        BackendError::Unsupported(why) => Err(BackendError::Unsupported(why)),
        BackendError::Failed(e) => Ok(Outcome::Checked(judge(t.result, Answer::Rejected(format!("{what}: {e}"))))),
    };
    let answer = |r: std::result::Result<(), String>| Ok(Outcome::Checked(judge(t.result, Answer::Accepted(r))));
    match file {
        KemFile::KeyGen | KemFile::SeedDecaps => {
            let (d, z) = seed_halves(bytes(&t.seed)).expect("shape-checked");
            let mut kp = match b.kem_keypair_from_seed(alg, &d, &z) {
                Ok(kp) => kp,
                Err(e) => return refused("key generation", e),
            };
            if file == KemFile::KeyGen {
                let dk = kp.decapsulation_key().map_err(|e| e.to_string());
                return answer(eq("ek", &kp.encapsulation_key(), ek).and(dk.and_then(|dk| eq("dk", &dk, bytes(&t.decaps_key)))));
            }
            match kp.decaps(c) {
                Ok(secret) => answer((if ek.is_empty() { Ok(()) } else { eq("ek", &kp.encapsulation_key(), ek) }).and(eq("K", &secret, k))),
                Err(e) => refused("decapsulation", e),
            }
        }
        KemFile::Encaps => {
            let mut enc = match b.kem_encapsulator(alg, ek) {
                Ok(enc) => enc,
                Err(e) => return refused("ek", e),
            };
            let m: [u8; 32] = bytes(&t.msg).try_into().expect("m is 32 bytes");
            match enc.encaps_with(&m) {
                Ok((ct, secret)) => answer(eq("c", &ct, c).and(eq("K", &secret, k))),
                Err(BackendError::Failed(e)) => refused("encapsulation", BackendError::Failed(e)),
                // No deterministic encapsulation (aws-lc-rs takes no m): an invalid ek must be
                // refused by the parse or by a random encapsulation (FIPS 203 §7.2's input
                // check); a valid one must encapsulate, but c and K cannot be compared, so it is
                // counted as skipped, not checked.
                Err(BackendError::Unsupported(why)) => match (t.result, enc.encaps()) {
                    (_, Err(e)) => refused("encapsulation", e),
                    (TestResult::Invalid, Ok(_)) => answer(Ok(())),
                    (_, Ok(_)) => Ok(Outcome::Skipped(format!("valid ek accepted and encapsulated to, but c and K not compared: {why}"))),
                },
            }
        }
        KemFile::Decaps => {
            let mut dk = match b.kem_decapsulator(alg, bytes(&t.decaps_key)) {
                Ok(dk) => dk,
                Err(e) => return refused("dk", e),
            };
            match dk.decaps(c) {
                Ok(secret) => answer(eq("K", &secret, k)),
                Err(e) => refused("decapsulation", e),
            }
        }
    }
}

/// Where RustCrypto's `ml-kem` 0.2.3 (the version Cargo.lock pins) departs from FIPS 203, and
/// so from Wycheproof: it skips the input checks of ML-KEM.Encaps (FIPS 203 §7.2, the modulus
/// check: an encapsulation key whose coefficients are not reduced mod q must be refused) and
/// of ML-KEM.Decaps (§7.3, the hash check: dk's stored H(ek) must match its ek; its
/// `DecapsulationKey::from_bytes` says "Should we verify that the provided `h` value is
/// valid?"). Only wrongly-accepted invalid vectors of exactly these kinds are listed; anything
/// else RustCrypto gets wrong fails, and a listed vector that starts to conform fails too.
fn kem_deviation(who: &str, alg: KemAlg, file: KemFile, t: &wycheproof::mlkem::Test) -> Option<&'static str> {
    if who != "rustcrypto" || t.result != TestResult::Invalid {
        return None;
    }
    match file {
        KemFile::Encaps if bytes(&t.encaps_key).len() == alg.lens().0 => {
            Some("ml-kem 0.2.3 has no FIPS 203 §7.2 encapsulation key (modulus) check")
        }
        KemFile::Decaps if t.flags.contains(&wycheproof::mlkem::TestFlag::InvalidDecapsulationKey) => {
            Some("ml-kem 0.2.3 has no FIPS 203 §7.3 decapsulation key (hash) check")
        }
        _ => None,
    }
}

fn run_kem_file(file: &'static str, name: wycheproof::mlkem::TestName, kind: KemFile, subjects: &[&dyn Backend]) -> (Cap, FileReport) {
    let set = wycheproof::mlkem::TestSet::load(name).expect("the crate's ML-KEM vectors parse");
    let alg = kem_of(set.test_groups[0].parameter_set);
    assert!(set.test_groups.iter().all(|g| kem_of(g.parameter_set) == alg), "one parameter set per file");
    let tests: Vec<wycheproof::mlkem::Test> = set.test_groups.into_iter().flat_map(|g| g.tests).collect();
    let cap = match kind {
        KemFile::KeyGen | KemFile::SeedDecaps => Cap::KemSeeded(alg),
        KemFile::Encaps => Cap::Kem(alg),
        KemFile::Decaps => Cap::KemImport(alg),
    };
    (cap, run_file(file, cap, subjects, &tests, |t| kem_shape(kind, t), |b, t| kem_one(b, alg, kind, t), |who, t| kem_deviation(who, alg, kind, t)))
}

// ---- the tests -------------------------------------------------------------------------------

macro_rules! sig_file_test {
    ($test:ident, $file:literal, $vectors:expr) => {
        #[test]
        fn $test() {
            let (alg, vectors) = $vectors;
            check_file(Cap::Verify(alg), |s| run_sig_file($file, alg, s, &vectors));
        }
    };
}

use wycheproof::ecdsa::TestName as Ecdsa;
use wycheproof::rsa_pkcs1_verify::TestName as Pkcs1;
use wycheproof::rsa_pss_verify::TestName as Pss;

sig_file_test!(ecdsa_secp256r1_sha256, "ecdsa_secp256r1_sha256_test.json", ecdsa_vectors(Ecdsa::EcdsaSecp256r1Sha256));
sig_file_test!(ecdsa_secp256r1_sha512, "ecdsa_secp256r1_sha512_test.json", ecdsa_vectors(Ecdsa::EcdsaSecp256r1Sha512));
sig_file_test!(ecdsa_secp384r1_sha384, "ecdsa_secp384r1_sha384_test.json", ecdsa_vectors(Ecdsa::EcdsaSecp384r1Sha384));
sig_file_test!(ecdsa_secp384r1_sha256, "ecdsa_secp384r1_sha256_test.json", ecdsa_vectors(Ecdsa::EcdsaSecp384r1Sha256));
sig_file_test!(ecdsa_secp384r1_sha512, "ecdsa_secp384r1_sha512_test.json", ecdsa_vectors(Ecdsa::EcdsaSecp384r1Sha512));
sig_file_test!(rsa_pkcs1_2048_sha256, "rsa_signature_2048_sha256_test.json", rsa_pkcs1_vectors(Pkcs1::Rsa2048Sha256));
sig_file_test!(rsa_pkcs1_3072_sha256, "rsa_signature_3072_sha256_test.json", rsa_pkcs1_vectors(Pkcs1::Rsa3072Sha256));
sig_file_test!(rsa_pkcs1_4096_sha256, "rsa_signature_4096_sha256_test.json", rsa_pkcs1_vectors(Pkcs1::Rsa4096Sha256));
sig_file_test!(rsa_pss_2048_sha256, "rsa_pss_2048_sha256_mgf1_32_test.json", rsa_pss_vectors(Pss::RsaPss2048Sha256Mgf1SaltLen32));
sig_file_test!(rsa_pss_2048_sha384, "rsa_pss_2048_sha384_mgf1_48_test.json", rsa_pss_vectors(Pss::RsaPss2048Sha384Mgf1SaltLen48));
sig_file_test!(rsa_pss_3072_sha256, "rsa_pss_3072_sha256_mgf1_32_test.json", rsa_pss_vectors(Pss::RsaPss3072Sha256Mgf1SaltLen32));
sig_file_test!(rsa_pss_4096_sha256, "rsa_pss_4096_sha256_mgf1_32_test.json", rsa_pss_vectors(Pss::RsaPss4096Sha256Mgf1SaltLen32));
sig_file_test!(rsa_pss_4096_sha512, "rsa_pss_4096_sha512_mgf1_64_test.json", rsa_pss_vectors(Pss::RsaPss4096Sha512Mgf1SaltLen64));
sig_file_test!(ed25519, "ed25519_test.json", (SigAlg::Ed25519, ed25519_vectors()));
sig_file_test!(mldsa_44_verify, "mldsa_44_verify_test.json", (SigAlg::MlDsa(MlDsaLevel::MlDsa44), ml_dsa_vectors(wycheproof::mldsa_verify::TestName::MlDsa44Verify)));
sig_file_test!(mldsa_65_verify, "mldsa_65_verify_test.json", (SigAlg::MlDsa(MlDsaLevel::MlDsa65), ml_dsa_vectors(wycheproof::mldsa_verify::TestName::MlDsa65Verify)));
sig_file_test!(mldsa_87_verify, "mldsa_87_verify_test.json", (SigAlg::MlDsa(MlDsaLevel::MlDsa87), ml_dsa_vectors(wycheproof::mldsa_verify::TestName::MlDsa87Verify)));

#[test]
fn aes_gcm() {
    // The AES-128 and AES-256 groups with a 12-byte IV and a 16-byte tag (cryptoperf's AEAD
    // shape); AES-192 and other IV/tag sizes are counted as skipped.
    // (Every backend has both AES-128-GCM and AES-256-GCM, so one capability stands for both.)
    let cap = Cap::Aead(AeadAlg::Aes128Gcm);
    check_file(cap, |s| run_aead_file("aes_gcm_test.json", wycheproof::aead::TestName::AesGcm, cap, s));
}

#[test]
fn chacha20_poly1305() {
    let cap = Cap::Aead(AeadAlg::ChaCha20Poly1305);
    check_file(cap, |s| run_aead_file("chacha20_poly1305_test.json", wycheproof::aead::TestName::ChaCha20Poly1305, cap, s));
}

#[test]
fn x25519() {
    let cap = Cap::Agree(KxAlg::X25519);
    let set = wycheproof::xdh::TestSet::load(wycheproof::xdh::TestName::X25519).expect("the crate's X25519 vectors parse");
    let tests: Vec<wycheproof::xdh::Test> = set.test_groups.into_iter().flat_map(|g| g.tests).collect();
    // ring has only ephemeral key agreement: it cannot import a private key, so it skips the
    // file ("unsupported", as the support table says); the other backends must check it.
    check_file(cap, |s| run_file("x25519_test.json", cap, s, &tests, |_| None, x25519_one, |_, _| None));
}

macro_rules! kem_file_test {
    ($test:ident, $file:literal, $name:ident, $kind:ident) => {
        #[test]
        fn $test() {
            let owned = subject_refs();
            let s: Vec<&dyn Backend> = owned.iter().map(|b| &**b).collect();
            let (cap, report) = run_kem_file($file, wycheproof::mlkem::TestName::$name, KemFile::$kind, &s);
            println!("{}", report.summary());
            report.assert_clean(cap, &s);
        }
    };
}

kem_file_test!(mlkem_512, "mlkem_512_test.json", MlKem512, SeedDecaps);
kem_file_test!(mlkem_768, "mlkem_768_test.json", MlKem768, SeedDecaps);
kem_file_test!(mlkem_1024, "mlkem_1024_test.json", MlKem1024, SeedDecaps);
kem_file_test!(mlkem_512_keygen_seed, "mlkem_512_keygen_seed_test.json", MlKem512KeyGenSeed, KeyGen);
kem_file_test!(mlkem_768_keygen_seed, "mlkem_768_keygen_seed_test.json", MlKem768KeyGenSeed, KeyGen);
kem_file_test!(mlkem_1024_keygen_seed, "mlkem_1024_keygen_seed_test.json", MlKem1024KeyGenSeed, KeyGen);
kem_file_test!(mlkem_512_encaps, "mlkem_512_encaps_test.json", MlKem512Encaps, Encaps);
kem_file_test!(mlkem_768_encaps, "mlkem_768_encaps_test.json", MlKem768Encaps, Encaps);
kem_file_test!(mlkem_1024_encaps, "mlkem_1024_encaps_test.json", MlKem1024Encaps, Encaps);
kem_file_test!(mlkem_512_semi_expanded_decaps, "mlkem_512_semi_expanded_decaps_test.json", MlKem512SemiExpandedDecaps, Decaps);
kem_file_test!(mlkem_768_semi_expanded_decaps, "mlkem_768_semi_expanded_decaps_test.json", MlKem768SemiExpandedDecaps, Decaps);
kem_file_test!(mlkem_1024_semi_expanded_decaps, "mlkem_1024_semi_expanded_decaps_test.json", MlKem1024SemiExpandedDecaps, Decaps);

// ---- the Wycheproof checks can fail ------------------------------------------------------------

/// A verifier that accepts everything fails the invalid vectors; one that rejects everything
/// fails the valid ones; the mock backend (an AEAD that neither encrypts nor authenticates, an
/// X25519 that returns zeros, an encapsulator that takes any key) fails the AEAD, X25519 and
/// ML-KEM files.
#[test]
fn wycheproof_checks_fail_on_wrong_backends() {
    use crate::backends::{LibraryInfo, Verifier};
    struct Fixed(bool);
    impl Verifier for Fixed {
        fn verify(&mut self, _: &[u8], _: &[u8]) -> crate::backends::Result<bool> {
            Ok(self.0)
        }
    }
    struct Always(bool);
    impl Backend for Always {
        fn info(&self) -> LibraryInfo {
            LibraryInfo { backend: if self.0 { "gullible" } else { "grumpy" }, library: "test".into(), library_version: "0".into(), fips: false, fips_provider: None }
        }
        fn verifier(&self, _: SigAlg, _: &[u8]) -> crate::backends::Result<Box<dyn Verifier>> {
            Ok(Box::new(Fixed(self.0)))
        }
    }
    let (alg, vectors) = ecdsa_vectors(Ecdsa::EcdsaSecp256r1Sha256);
    for (backend, wrong) in [(Always(true), "invalid vector accepted"), (Always(false), "valid vector rejected")] {
        let r = run_sig_file("ecdsa_secp256r1_sha256_test.json", alg, &[&backend], &vectors);
        assert!(r.ledger.failures.iter().any(|f| f.contains(wrong)), "{}: {:?}", backend.info().backend, r.ledger.failures.first());
    }
    let mock = crate::backends::by_name("mock").expect("mock");
    let cap = Cap::Aead(AeadAlg::ChaCha20Poly1305);
    let r = run_aead_file("chacha20_poly1305_test.json", wycheproof::aead::TestName::ChaCha20Poly1305, cap, &[&*mock]);
    assert!(r.ledger.failures.iter().any(|f| f.contains("invalid vector accepted")), "{:?}", r.ledger.failures.first());
    let set = wycheproof::xdh::TestSet::load(wycheproof::xdh::TestName::X25519).expect("X25519 vectors");
    let tests: Vec<wycheproof::xdh::Test> = set.test_groups.into_iter().flat_map(|g| g.tests).collect();
    let r = run_file("x25519_test.json", Cap::Agree(KxAlg::X25519), &[&*mock], &tests, |_| None, x25519_one, |_, _| None);
    assert!(!r.ledger.failures.is_empty());
    let (_, r) = run_kem_file("mlkem_768_encaps_test.json", wycheproof::mlkem::TestName::MlKem768Encaps, KemFile::Encaps, &[&*mock]);
    assert!(r.ledger.failures.iter().any(|f| f.contains("invalid vector accepted")), "{:?}", r.ledger.failures.first());
    // A vector listed as a known deviation that conforms fails: AWS-LC refuses the corrupted
    // decapsulation keys that RustCrypto takes, so listing them for AWS-LC must fail.
    let awslc = crate::backends::by_name("aws-lc").expect("aws-lc");
    let set = wycheproof::mlkem::TestSet::load(wycheproof::mlkem::TestName::MlKem768SemiExpandedDecaps).expect("ML-KEM vectors");
    let tests: Vec<wycheproof::mlkem::Test> = set.test_groups.into_iter().flat_map(|g| g.tests).collect();
    let r = run_file("mlkem_768_semi_expanded_decaps_test.json", Cap::KemImport(KemAlg::MlKem768), &[&*awslc], &tests, |_| None,
        |b, t| kem_one(b, KemAlg::MlKem768, KemFile::Decaps, t),
        |_, t| kem_deviation("rustcrypto", KemAlg::MlKem768, KemFile::Decaps, t));
    assert!(r.ledger.failures.iter().any(|f| f.contains("now conforms")), "{:?}", r.ledger.failures);
    // And the report refuses a file no backend checked.
    let empty = FileReport { file: "none", total: 1, deviations: BTreeMap::new(), shape_skips: BTreeMap::new(), ledger: Ledger::default() };
    let caught = std::panic::catch_unwind(|| {
        let openssl = crate::backends::by_name("openssl").expect("openssl");
        empty.assert_clean(Cap::Aead(AeadAlg::Aes128Gcm), &[&*openssl])
    });
    assert!(caught.is_err(), "a file no backend checked must fail");
}
