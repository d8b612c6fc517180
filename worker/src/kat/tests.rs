//! Tests of the validation itself: every real backend passes on what it supports, and a
//! deliberately broken backend fails both the known-answer test and the cross checks (so the
//! checks can fail).

use super::*;
use crate::backends::openssl::OpenSsl;
use crate::backends::rustcrypto::RustCrypto;
use crate::backends::{hybrid, Agreement, Digest, LibraryInfo, Mac, Signer};
use crate::ops::keys::KeyPair;
use crate::ops::{DigestAlg, KemAlg, KeyGenAlg, KxAlg, RawParams, SigFamily, ALL_OPS};

fn params(op: Op, digest: Option<&str>, padding: Option<&str>) -> Params {
    let raw = RawParams {
        size_bytes: None,
        digest: digest.map(str::to_string),
        padding: padding.map(str::to_string),
    };
    Params::resolve(op, &raw).unwrap()
}

/// Every real backend, every operation with its default parameters: the validation passes or
/// the backend says "unsupported"; never a failed check.
#[test]
fn every_backend_passes_what_it_supports() {
    let mut supported = 0;
    for name in backends::NAMES {
        let backend = backends::by_name(name).unwrap();
        for op_name in ALL_OPS {
            let op = Op::parse(op_name).unwrap();
            match validate(&*backend, op, &params(op, None, None)) {
                Ok(v) => {
                    assert!(v.passed(), "{name} {op_name}: {:?}", v.failure());
                    assert_eq!(v.kat, "pass", "{name} {op_name}");
                    assert!(!v.kat_source.is_empty(), "{name} {op_name} cites no source");
                    supported += 1;
                }
                Err(BackendError::Unsupported(_)) => {}
                Err(BackendError::Failed(e)) => panic!("{name} {op_name}: {e}"),
            }
        }
    }
    assert!(supported >= 2 * 20 + 2 * 22, "only {supported} (backend, op) pairs validated");
}

/// The key-size study's configurations and the other digests and paddings of RSA.
#[test]
fn rsa_digests_and_paddings_validate() {
    for name in ["openssl", "rustcrypto"] {
        let backend = backends::by_name(name).unwrap();
        for digest in ["sha1", "sha256", "sha384", "sha512"] {
            for padding in ["pkcs1", "pss"] {
                for op_name in ["rsa2048-sign", "rsa2048-verify"] {
                    let op = Op::parse(op_name).unwrap();
                    let v = validate(&*backend, op, &params(op, Some(digest), Some(padding)))
                        .unwrap_or_else(|e| panic!("{name} {op_name} {digest} {padding}: {e}"));
                    assert!(v.passed(), "{name} {op_name} {digest} {padding}: {:?}", v.failure());
                }
            }
        }
    }
}

/// The computed PKCS#1 v1.5 vectors came from OpenSSL; RustCrypto, which shares no code with
/// it, reproduces them byte for byte, so they are not OpenSSL checking itself.
#[test]
fn rustcrypto_reproduces_the_computed_rsa_vectors() {
    for bits in [2048, 3072] {
        for digest in [DigestAlg::Sha1, DigestAlg::Sha256, DigestAlg::Sha512] {
            let alg = SigAlg::Rsa { bits, digest, padding: RsaPadding::Pkcs1 };
            let key = keys::signing_key(SigFamily::Rsa(bits));
            let sig = RustCrypto.signer(alg, &key).unwrap().sign(b"abc").unwrap();
            assert_eq!(sig, vectors::rsa_abc(bits, digest, RsaPadding::Pkcs1).unwrap(), "{bits} {digest}");
        }
    }
}

// ---- a deliberately broken backend ---------------------------------------------------------

/// OpenSSL with one bit of every output flipped (digests, MACs, sealed data, signatures,
/// shared secrets). Also used by the conformance suite's negative test.
pub(crate) struct Broken;

fn flip(mut v: Vec<u8>) -> Vec<u8> {
    v[0] ^= 0x80;
    v
}

struct BrokenDigest(Box<dyn Digest>);
impl Digest for BrokenDigest {
    fn digest(&mut self, data: &[u8], out: &mut Vec<u8>) -> backends::Result<()> {
        self.0.digest(data, out)?;
        out[0] ^= 0x80;
        Ok(())
    }
}
struct BrokenMac(Box<dyn Mac>);
impl Mac for BrokenMac {
    fn mac(&mut self, data: &[u8], out: &mut Vec<u8>) -> backends::Result<()> {
        self.0.mac(data, out)?;
        out[0] ^= 0x80;
        Ok(())
    }
}
struct BrokenAead(Box<dyn backends::Aead>);
impl backends::Aead for BrokenAead {
    fn seal(&mut self, n: &[u8; 12], aad: &[u8], pt: &[u8], out: &mut Vec<u8>) -> backends::Result<()> {
        self.0.seal(n, aad, pt, out)?;
        out[0] ^= 0x80;
        Ok(())
    }
    fn open(&mut self, n: &[u8; 12], aad: &[u8], sealed: &[u8], out: &mut Vec<u8>) -> backends::Result<()> {
        self.0.open(n, aad, sealed, out)?;
        if let Some(first) = out.first_mut() {
            *first ^= 0x80;
        }
        Ok(())
    }
}
struct BrokenXts(Box<dyn backends::SectorCipher>);
impl backends::SectorCipher for BrokenXts {
    fn encrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> backends::Result<()> {
        self.0.encrypt_sector(sector, buf)?;
        buf[0] ^= 0x80;
        Ok(())
    }
    fn decrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> backends::Result<()> {
        self.0.decrypt_sector(sector, buf)?;
        buf[0] ^= 0x80;
        Ok(())
    }
}
struct BrokenSigner(Box<dyn Signer>);
impl Signer for BrokenSigner {
    fn sign(&mut self, msg: &[u8]) -> backends::Result<Vec<u8>> {
        // Signs a different message: well-formed, wrong.
        let mut other = msg.to_vec();
        other.push(0);
        self.0.sign(&other)
    }
}
struct BrokenAgreement(Box<dyn Agreement>);
impl Agreement for BrokenAgreement {
    fn public_key(&self) -> Vec<u8> {
        self.0.public_key()
    }
    fn derive(&mut self, peer: &[u8]) -> backends::Result<Vec<u8>> {
        self.0.derive(peer).map(flip)
    }
}

impl Backend for Broken {
    fn info(&self) -> LibraryInfo {
        LibraryInfo { backend: "broken", ..OpenSsl.info() }
    }
    fn digest(&self, alg: DigestAlg) -> backends::Result<Box<dyn Digest>> {
        Ok(Box::new(BrokenDigest(OpenSsl.digest(alg)?)))
    }
    fn hmac(&self, alg: DigestAlg, key: &[u8]) -> backends::Result<Box<dyn Mac>> {
        Ok(Box::new(BrokenMac(OpenSsl.hmac(alg, key)?)))
    }
    fn aead(&self, alg: crate::ops::AeadAlg, key: &[u8]) -> backends::Result<Box<dyn backends::Aead>> {
        Ok(Box::new(BrokenAead(OpenSsl.aead(alg, key)?)))
    }
    fn signer(&self, alg: SigAlg, key: &KeyPair) -> backends::Result<Box<dyn Signer>> {
        Ok(Box::new(BrokenSigner(OpenSsl.signer(alg, key)?)))
    }
    fn xts(&self, bits: backends::XtsBits, key: &[u8]) -> backends::Result<Box<dyn backends::SectorCipher>> {
        Ok(Box::new(BrokenXts(OpenSsl.xts(bits, key)?)))
    }
    fn verifier(&self, alg: SigAlg, public: &[u8]) -> backends::Result<Box<dyn Verifier>> {
        OpenSsl.verifier(alg, public)
    }
    fn agreement(&self, alg: KxAlg, ours: Option<&KeyPair>) -> backends::Result<Box<dyn Agreement>> {
        Ok(Box::new(BrokenAgreement(OpenSsl.agreement(alg, ours)?)))
    }
}

const BROKEN_OPS: &[&str] = &[
    "sha256",
    "hmac-sha256",
    "aes-128-gcm-seal",
    "aes-128-gcm-open",
    "chacha20-poly1305-seal",
    "rsa2048-sign",
    "ecdsa-p256-sign",
    "ed25519-sign",
    "x25519-derive",
    "ecdh-p256-derive",
];

#[test]
fn a_broken_backend_fails_its_known_answer_test() {
    for op_name in BROKEN_OPS {
        let op = Op::parse(op_name).unwrap();
        let v = validate_against(&Broken, op, &params(op, None, None), &[]).unwrap();
        assert!(v.kat.failed(), "{op_name}: KAT says {}", v.kat);
        assert!(v.failure().unwrap().starts_with("known-answer test: fail"), "{op_name}");
    }
}

#[test]
fn a_broken_backend_fails_the_cross_check_on_either_side() {
    let others: Vec<Box<dyn Backend>> = vec![Box::new(Broken)];
    for op_name in BROKEN_OPS {
        // The broken backend verifies correctly: its wrong signatures are met on the verify
        // side of the check (we verify what it signed).
        let op_name = &op_name.replace("-sign", "-verify");
        let op = Op::parse(op_name).unwrap();
        let p = params(op, None, None);
        let v = validate_against(&OpenSsl, op, &p, &others).unwrap();
        assert_eq!(v.kat, "pass", "{op_name}");
        assert_eq!(v.cross_checks.len(), 1);
        assert_eq!(v.cross_checks[0].status, "fail", "{op_name}: {:?}", v.cross_checks[0]);
        assert!(!v.passed());
        assert!(v.failure().unwrap().starts_with("cross-backend check with broken"), "{op_name}");
    }
}

#[test]
fn a_verifier_that_accepts_everything_fails() {
    struct Yes;
    impl Verifier for Yes {
        fn verify(&mut self, _: &[u8], _: &[u8]) -> backends::Result<bool> {
            Ok(true)
        }
    }
    struct Gullible;
    impl Backend for Gullible {
        fn info(&self) -> LibraryInfo {
            LibraryInfo { backend: "gullible", ..OpenSsl.info() }
        }
        fn verifier(&self, _: SigAlg, _: &[u8]) -> backends::Result<Box<dyn Verifier>> {
            Ok(Box::new(Yes))
        }
    }
    for op_name in ["rsa2048-verify", "ecdsa-p256-verify", "ed25519-verify", "ml-dsa-65-verify"] {
        let op = Op::parse(op_name).unwrap();
        let v = validate_against(&Gullible, op, &params(op, None, None), &[]).unwrap();
        assert_eq!(v.kat, "fail: a tampered signature verified", "{op_name}");
    }
}

#[test]
fn unsupported_is_not_a_failure() {
    let op = Op::parse("ffdh-2048-derive").unwrap();
    match validate(&RustCrypto, op, &params(op, None, None)) {
        Err(BackendError::Unsupported(why)) => assert!(!why.is_empty()),
        other => panic!("expected unsupported, got {other:?}"),
    }
    // The mock is not validated: it computes nothing.
    let mock = backends::by_name("mock").unwrap();
    let v = validate(&*mock, Op::parse("sha256").unwrap(), &params(Op::parse("sha256").unwrap(), None, None)).unwrap();
    assert!(v.passed() && matches!(v.kat, KatStatus::NotApplicable(_)));
}

#[test]
fn computed_vectors_cover_every_key_digest_and_padding() {
    for bits in [2048, 3072, 4096] {
        for d in DigestAlg::ALL {
            for p in [RsaPadding::Pkcs1, RsaPadding::Pss] {
                assert_eq!(vectors::rsa_abc(bits, d, p).map(|s| s.len()), Some(bits as usize / 8));
            }
        }
    }
    for bits in [256, 384] {
        for d in DigestAlg::ALL {
            assert!(vectors::ecdsa_abc(bits, d).is_some_and(|s| s[0] == 0x30), "p{bits} {d}");
        }
    }
}

// ---- post-quantum -------------------------------------------------------------------------

/// RustCrypto with every post-quantum output made wrong: decapsulated and encapsulated
/// secrets flipped, ML-DSA signatures made over another message, seeded public keys flipped.
/// X25519 is left correct, so the hybrid's failures come from its ML-KEM half.
pub(crate) struct BrokenPq;

struct BrokenDecaps(Box<dyn backends::KemDecapsulator>);
impl backends::KemDecapsulator for BrokenDecaps {
    fn encapsulation_key(&self) -> Vec<u8> {
        self.0.encapsulation_key()
    }
    fn decaps(&mut self, ct: &[u8]) -> backends::Result<Vec<u8>> {
        self.0.decaps(ct).map(flip)
    }
    fn decapsulation_key(&self) -> backends::Result<Vec<u8>> {
        self.0.decapsulation_key()
    }
}
struct BrokenEncaps(Box<dyn backends::KemEncapsulator>);
impl backends::KemEncapsulator for BrokenEncaps {
    fn encaps(&mut self) -> backends::Result<(Vec<u8>, Vec<u8>)> {
        self.0.encaps().map(|(ct, ss)| (ct, flip(ss)))
    }
    fn encaps_with(&mut self, m: &[u8; 32]) -> backends::Result<(Vec<u8>, Vec<u8>)> {
        self.0.encaps_with(m).map(|(ct, ss)| (ct, flip(ss)))
    }
}

impl Backend for BrokenPq {
    fn info(&self) -> LibraryInfo {
        LibraryInfo { backend: "broken-pq", ..RustCrypto.info() }
    }
    fn signer(&self, alg: SigAlg, key: &KeyPair) -> backends::Result<Box<dyn Signer>> {
        Ok(Box::new(BrokenSigner(RustCrypto.signer(alg, key)?)))
    }
    fn verifier(&self, alg: SigAlg, public: &[u8]) -> backends::Result<Box<dyn Verifier>> {
        RustCrypto.verifier(alg, public)
    }
    fn agreement(&self, alg: KxAlg, ours: Option<&KeyPair>) -> backends::Result<Box<dyn Agreement>> {
        RustCrypto.agreement(alg, ours)
    }
    fn kem_keypair(&self, alg: KemAlg) -> backends::Result<Box<dyn backends::KemDecapsulator>> {
        match alg {
            KemAlg::X25519MlKem768 => hybrid::keypair(self),
            _ => Ok(Box::new(BrokenDecaps(RustCrypto.kem_keypair(alg)?))),
        }
    }
    fn kem_keypair_from_seed(&self, alg: KemAlg, d: &[u8; 32], z: &[u8; 32]) -> backends::Result<Box<dyn backends::KemDecapsulator>> {
        Ok(Box::new(BrokenDecaps(RustCrypto.kem_keypair_from_seed(alg, d, z)?)))
    }
    fn kem_decapsulator(&self, alg: KemAlg, dk: &[u8]) -> backends::Result<Box<dyn backends::KemDecapsulator>> {
        Ok(Box::new(BrokenDecaps(RustCrypto.kem_decapsulator(alg, dk)?)))
    }
    fn kem_encapsulator(&self, alg: KemAlg, ek: &[u8]) -> backends::Result<Box<dyn backends::KemEncapsulator>> {
        match alg {
            KemAlg::X25519MlKem768 => hybrid::encapsulator(self, ek),
            _ => Ok(Box::new(BrokenEncaps(RustCrypto.kem_encapsulator(alg, ek)?))),
        }
    }
    fn sig_keygen(&self, alg: SigAlg, seed: Option<&[u8]>) -> backends::Result<backends::GeneratedSigner> {
        let g = RustCrypto.sig_keygen(alg, seed)?;
        Ok(backends::GeneratedSigner { signer: Box::new(BrokenSigner(g.signer)), public: flip(g.public) })
    }
    fn owned(&self) -> Option<Box<dyn Backend>> {
        Some(Box::new(BrokenPq))
    }
}

/// The operations whose output [`BrokenPq`] makes wrong: every post-quantum operation of
/// [`ALL_OPS`] but ML-DSA verification (its verifier is RustCrypto's own).
fn broken_pq_ops() -> Vec<Op> {
    let ops: Vec<Op> = ALL_OPS
        .iter()
        .map(|name| Op::parse(name).unwrap())
        .filter(|op| {
            matches!(
                op,
                Op::Encaps(_)
                    | Op::Decaps(_)
                    | Op::Keygen(KeyGenAlg::Kem(_) | KeyGenAlg::Sig(SigFamily::MlDsa(_)))
                    | Op::Sign(SigFamily::MlDsa(_))
            )
        })
        .collect();
    // ML-KEM-512/768/1024 and X25519MLKEM768 keygen, encaps, decaps; ML-DSA-44/65/87 keygen, sign.
    assert_eq!(ops.len(), 4 * 3 + 3 * 2, "{ops:?}");
    ops
}

#[test]
fn a_broken_post_quantum_backend_fails_its_known_answer_test() {
    for op in broken_pq_ops() {
        let v = validate_against(&BrokenPq, op, &params(op, None, None), &[]).unwrap();
        assert!(v.kat.failed(), "{op:?}: KAT says {} ({})", v.kat, v.kat_source);
    }
}

#[test]
fn a_broken_post_quantum_backend_fails_the_cross_check() {
    let others: Vec<Box<dyn Backend>> = vec![Box::new(BrokenPq)];
    for op_name in [
        "ml-kem-512-encaps",
        "ml-kem-768-decaps",
        "ml-kem-1024-keygen",
        "ml-dsa-44-verify",
        "ml-dsa-87-verify",
        "x25519mlkem768-encaps",
        "x25519mlkem768-decaps",
    ] {
        let op = Op::parse(op_name).unwrap();
        for good in [Box::new(RustCrypto) as Box<dyn Backend>, backends::by_name("aws-lc").unwrap()] {
            let v = validate_against(&*good, op, &params(op, None, None), &others).unwrap();
            assert_eq!(v.kat, "pass", "{op_name}");
            assert_eq!(v.cross_checks[0].status, "fail", "{op_name}: {:?}", v.cross_checks[0]);
        }
    }
}

/// aws-lc-rs takes no seeds and no m: its KATs say so and still check the ACVP keys, and the
/// post-quantum operations pass on both libraries that have them.
#[test]
fn post_quantum_sources_are_honest() {
    let awslc = backends::by_name("aws-lc").unwrap();
    for (op_name, awslc_says, rustcrypto_says) in [
        ("ml-kem-768-keygen", "consistency check, not a known answer", "ML-KEM-keyGen-FIPS203"),
        ("ml-kem-768-encaps", "decapsulated with its dk", "with the test case's m"),
        ("ml-kem-768-decaps", "tcId 26", "tcId 26"),
        ("ml-dsa-65-keygen", "tcId 26", "tcId 26"),
        ("ml-dsa-65-verify", "dilithium-py", "dilithium-py"),
        ("x25519mlkem768-decaps", "RFC 7748", "RFC 7748"),
        ("x25519-keygen", "RFC 7748", "RFC 7748"),
    ] {
        let op = Op::parse(op_name).unwrap();
        for (backend, says) in [(&*awslc, awslc_says), (&RustCrypto as &dyn Backend, rustcrypto_says)] {
            let v = validate(backend, op, &params(op, None, None)).unwrap();
            assert!(v.passed(), "{op_name}: {:?}", v.failure());
            assert!(v.kat_source.contains(says), "{op_name}: {}", v.kat_source);
        }
    }
}

#[test]
fn vector_files_are_complete() {
    for alg in [KemAlg::MlKem512, KemAlg::MlKem768, KemAlg::MlKem1024] {
        let v = vectors::ml_kem(alg);
        let (ek_len, ct_len, ss_len) = alg.lens();
        assert_eq!(v.ek(alg.rank()).len(), ek_len);
        assert_eq!(v.dk.len(), 768 * alg.rank() + 96);
        assert_eq!((v.c.len(), v.k.len(), v.k_rejected.len()), (ct_len, ss_len, ss_len));
        assert_ne!(v.k, v.k_rejected);
    }
    for level in crate::ops::MlDsaLevel::ALL {
        let v = vectors::ml_dsa(level);
        assert_eq!((v.seed.len(), v.pk.len(), v.sig_abc.len()), (32, level.lens().0, level.lens().1));
    }
}

/// The KAT status is serialised as the strings stored results carry.
#[test]
fn kat_status_serialises_as_before() {
    let json = |k: KatStatus| serde_json::to_value(k).unwrap();
    assert_eq!(json(KatStatus::Pass), "pass");
    assert_eq!(json(KatStatus::Fail("secret differs".into())), "fail: secret differs");
    assert_eq!(json(KatStatus::NotApplicable("mock".into())), "not applicable (mock)");
    assert!(KatStatus::Fail(String::new()).failed() && !KatStatus::NotApplicable(String::new()).failed());
}
