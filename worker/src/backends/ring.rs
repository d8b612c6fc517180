//! The ring backend: the `ring` crate (BoringSSL-derived assembly and C behind a Rust API).
//!
//! As in the other backends, everything that can be done once is done at prepare time:
//!
//! - digests: the one-shot `digest::digest` (ring has no reusable hash state to reset);
//! - HMAC: an `hmac::Key` built once, which holds the keyed inner and outer hash states; a call
//!   clones them and hashes the message;
//! - AEADs: a `LessSafeKey` with the key expanded once, sealing and opening in the caller's
//!   buffer (`seal_in_place_append_tag`, `open_in_place`);
//! - RSA/ECDSA/Ed25519 signing: the key pair parsed (and, for ring, validated) once, with one
//!   `SystemRandom` kept for the RSA-PSS salt, RSA blinding and the ECDSA nonce;
//! - verification: `signature::UnparsedPublicKey` over the key bytes. ring has no
//!   "parsed public key" for verification: it parses the key (and, for RSA, builds the
//!   Montgomery constants of the modulus) inside every `verify`. That cost is part of what any
//!   ring user pays per verification, so it is part of what is timed.
//!
//! What ring cannot do here, and says so as "unsupported":
//! - SHA3-256 (digest, HMAC, and as the digest of a signature): ring has no SHA-3;
//! - RSA signatures with SHA-1: ring verifies PKCS#1 v1.5 with SHA-1
//!   (`RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY`) but cannot make them, and has no PSS
//!   with SHA-1 at all; a SHA-1 verify case gets its signature from another backend
//!   (`crate::ops::prepare`);
//! - ECDSA: ring signs P-256 only with SHA-256 and P-384 only with SHA-384; it verifies
//!   P-256 and P-384 each with SHA-256 or SHA-384, and nothing with SHA-1 or SHA-512;
//! - key agreement: ring's `agreement` API has only `EphemeralPrivateKey`, consumed by the one
//!   `agree_ephemeral` it allows, so there is no fixed key whose derive could be timed on its
//!   own; FFDH does not exist in ring at all. Its ephemeral key pairs are what a key share is,
//!   so `x25519-keygen` and `ecdh-p256-keygen` run on ring (`Backend::key_share`);
//! - ML-KEM, X25519MLKEM768 and ML-DSA: ring has none (the trait's default says so for KEMs);
//! - AES-XTS (the `storage` workload's sector encryption): ring has none; its AES-256-GCM
//!   serves the `aes-256-gcm` storage scheme.

use ring::aead::{self, LessSafeKey, UnboundKey};
use ring::rand::SystemRandom;
use ring::signature::{
    self, EcdsaKeyPair, EcdsaSigningAlgorithm, Ed25519KeyPair, RsaEncoding, RsaKeyPair,
    UnparsedPublicKey, VerificationAlgorithm,
};
use ring::{agreement, digest, hmac};

super::ring_api::ring_api!(ring);

use super::{
    check_aead_key, check_len, check_rsa_bits, failed, unsupported, Aead, Agreement, Backend, BackendError, Digest, KeyShare, LibraryInfo, Mac,
    Result, Signer, Verifier,
};
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KxAlg, RsaPadding, SigAlg};

/// The ring library.
pub struct Ring;

/// The `ring` crate version this backend is built from, as locked in `Cargo.lock` (a test
/// keeps this in step; ring has no run-time version function).
const CRATE_VERSION: &str = "0.17.14";

impl Backend for Ring {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "ring",
            library: "ring".into(),
            library_version: CRATE_VERSION.into(),
            fips: false,
            fips_provider: None,
        }
    }

    fn digest(&self, alg: DigestAlg) -> Result<Box<dyn Digest>> {
        let alg = match alg {
            DigestAlg::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
            DigestAlg::Sha256 => &digest::SHA256,
            DigestAlg::Sha384 => &digest::SHA384,
            DigestAlg::Sha512 => &digest::SHA512,
            DigestAlg::Sha3_256 => return unsupported("ring has no SHA3-256"),
        };
        Ok(Box::new(ring_api::Digest(alg)))
    }

    fn hmac(&self, alg: DigestAlg, key: &[u8]) -> Result<Box<dyn Mac>> {
        let alg = match alg {
            DigestAlg::Sha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            DigestAlg::Sha256 => hmac::HMAC_SHA256,
            DigestAlg::Sha384 => hmac::HMAC_SHA384,
            DigestAlg::Sha512 => hmac::HMAC_SHA512,
            DigestAlg::Sha3_256 => return unsupported("ring has no HMAC-SHA3-256 (no SHA-3)"),
        };
        Ok(Box::new(ring_api::Hmac(hmac::Key::new(alg, key))))
    }

    fn aead(&self, alg: AeadAlg, key: &[u8]) -> Result<Box<dyn Aead>> {
        let ring_alg = match alg {
            AeadAlg::Aes128Gcm => &aead::AES_128_GCM,
            AeadAlg::Aes256Gcm => &aead::AES_256_GCM,
            AeadAlg::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        };
        if ring_alg.nonce_len() != AeadAlg::NONCE_LEN || ring_alg.tag_len() != AeadAlg::TAG_LEN {
            return Err(BackendError::Failed(format!(
                "ring's {} has a {}-byte nonce and a {}-byte tag, expected {} and {}",
                alg.name(),
                ring_alg.nonce_len(),
                ring_alg.tag_len(),
                AeadAlg::NONCE_LEN,
                AeadAlg::TAG_LEN
            )));
        }
        check_aead_key(alg, key)?;
        let key = UnboundKey::new(ring_alg, key)
            .map_err(|_| BackendError::Failed(format!("ring refused the {} key", alg.name())))?;
        Ok(Box::new(ring_api::Aead(LessSafeKey::new(key))))
    }

    fn xts(&self, _: super::XtsBits, _: &[u8]) -> Result<Box<dyn super::SectorCipher>> {
        unsupported("ring has no AES-XTS")
    }

    fn signer(&self, alg: SigAlg, key: &KeyPair) -> Result<Box<dyn Signer>> {
        let rng = SystemRandom::new();
        match alg {
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                let encoding: &'static dyn RsaEncoding = match (padding, digest) {
                    (RsaPadding::Pkcs1, DigestAlg::Sha256) => &signature::RSA_PKCS1_SHA256,
                    (RsaPadding::Pkcs1, DigestAlg::Sha384) => &signature::RSA_PKCS1_SHA384,
                    (RsaPadding::Pkcs1, DigestAlg::Sha512) => &signature::RSA_PKCS1_SHA512,
                    (RsaPadding::Pss, DigestAlg::Sha256) => &signature::RSA_PSS_SHA256,
                    (RsaPadding::Pss, DigestAlg::Sha384) => &signature::RSA_PSS_SHA384,
                    (RsaPadding::Pss, DigestAlg::Sha512) => &signature::RSA_PSS_SHA512,
                    (_, DigestAlg::Sha1) => {
                        return unsupported(
                            "ring cannot make SHA-1 RSA signatures (verification only)",
                        )
                    }
                    (_, DigestAlg::Sha3_256) => {
                        return unsupported("ring has no RSA signatures with SHA3-256 (no SHA-3)")
                    }
                };
                let key = RsaKeyPair::from_pkcs8(key.private_pkcs8)
                    .map_err(|e| failed(format!("ring rejected the RSA private key: {e}")))?;
                let sig_len = key.public().modulus_len();
                check_rsa_bits(sig_len * 8, bits)?;
                Ok(Box::new(ring_api::RsaSigner { key, encoding, rng, sig_len }))
            }
            SigAlg::EcdsaP256 { digest } => {
                let alg = match digest {
                    DigestAlg::Sha256 => &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                    other => {
                        return unsupported(format!(
                            "ring signs ECDSA P-256 only with SHA-256, not {other}"
                        ))
                    }
                };
                ecdsa_signer(alg, "P-256", key, rng)
            }
            SigAlg::EcdsaP384 { digest } => {
                let alg = match digest {
                    DigestAlg::Sha384 => &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
                    other => {
                        return unsupported(format!(
                            "ring signs ECDSA P-384 only with SHA-384, not {other}"
                        ))
                    }
                };
                ecdsa_signer(alg, "P-384", key, rng)
            }
            SigAlg::Ed25519 => {
                let key = Ed25519KeyPair::from_seed_and_public_key(key.private_raw, key.public)
                    .map_err(|e| failed(format!("ring rejected the Ed25519 key pair: {e}")))?;
                Ok(Box::new(ring_api::Ed25519Signer(key)))
            }
            SigAlg::MlDsa(level) => unsupported(format!("ring has no {} (no ML-DSA)", level.name())),
        }
    }

    fn verifier(&self, alg: SigAlg, public: &[u8]) -> Result<Box<dyn Verifier>> {
        let ring_alg: &'static dyn VerificationAlgorithm = match alg {
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                let ring_alg: &'static dyn VerificationAlgorithm = match (padding, digest) {
                    (RsaPadding::Pkcs1, DigestAlg::Sha1) => {
                        &signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY
                    }
                    (RsaPadding::Pkcs1, DigestAlg::Sha256) => {
                        &signature::RSA_PKCS1_2048_8192_SHA256
                    }
                    (RsaPadding::Pkcs1, DigestAlg::Sha384) => {
                        &signature::RSA_PKCS1_2048_8192_SHA384
                    }
                    (RsaPadding::Pkcs1, DigestAlg::Sha512) => {
                        &signature::RSA_PKCS1_2048_8192_SHA512
                    }
                    (RsaPadding::Pss, DigestAlg::Sha256) => &signature::RSA_PSS_2048_8192_SHA256,
                    (RsaPadding::Pss, DigestAlg::Sha384) => &signature::RSA_PSS_2048_8192_SHA384,
                    (RsaPadding::Pss, DigestAlg::Sha512) => &signature::RSA_PSS_2048_8192_SHA512,
                    (RsaPadding::Pss, DigestAlg::Sha1) => {
                        return unsupported("ring has no RSA-PSS with SHA-1")
                    }
                    (_, DigestAlg::Sha3_256) => {
                        return unsupported("ring has no RSA signatures with SHA3-256 (no SHA-3)")
                    }
                };
                let have = pkcs1_modulus_bits(public).ok_or_else(|| {
                    BackendError::Failed("RSA public key is not a DER PKCS#1 RSAPublicKey".into())
                })?;
                check_rsa_bits(have, bits)?;
                ring_alg
            }
            SigAlg::EcdsaP256 { digest } => {
                check_sec1_point(public, "P-256", 32)?;
                match digest {
                    DigestAlg::Sha256 => &signature::ECDSA_P256_SHA256_ASN1,
                    DigestAlg::Sha384 => &signature::ECDSA_P256_SHA384_ASN1,
                    other => {
                        return unsupported(format!(
                            "ring verifies ECDSA P-256 only with SHA-256 or SHA-384, not {other}"
                        ))
                    }
                }
            }
            SigAlg::EcdsaP384 { digest } => {
                check_sec1_point(public, "P-384", 48)?;
                match digest {
                    DigestAlg::Sha256 => &signature::ECDSA_P384_SHA256_ASN1,
                    DigestAlg::Sha384 => &signature::ECDSA_P384_SHA384_ASN1,
                    other => {
                        return unsupported(format!(
                            "ring verifies ECDSA P-384 only with SHA-256 or SHA-384, not {other}"
                        ))
                    }
                }
            }
            SigAlg::Ed25519 => {
                check_len("Ed25519 public key", public, 32)?;
                &signature::ED25519
            }
            SigAlg::MlDsa(level) => {
                return unsupported(format!("ring has no {} (no ML-DSA)", level.name()))
            }
        };
        Ok(Box::new(RingVerifier(UnparsedPublicKey::new(
            ring_alg,
            public.to_vec(),
        ))))
    }

    fn agreement(&self, alg: KxAlg, _ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        match alg {
            KxAlg::X25519 | KxAlg::EcdhP256 => unsupported(
                "ring has only ephemeral (single-use) key agreement: no reusable key pair, so \
                 no fixed-key derive can be timed (its key shares are: x25519-keygen, \
                 ecdh-p256-keygen)",
            ),
            KxAlg::Ffdh2048 => unsupported("ring has no FFDH (finite-field Diffie-Hellman)"),
        }
    }

    fn key_share(&self, alg: KxAlg) -> Result<Box<dyn KeyShare>> {
        let algorithm = match alg {
            KxAlg::X25519 => &agreement::X25519,
            KxAlg::EcdhP256 => &agreement::ECDH_P256,
            KxAlg::Ffdh2048 => return unsupported("ring has no FFDH (finite-field Diffie-Hellman)"),
        };
        let key = agreement::EphemeralPrivateKey::generate(algorithm, &SystemRandom::new())
            .map_err(|_| BackendError::Failed("ring could not generate a key pair".into()))?;
        let public = key
            .compute_public_key()
            .map_err(|_| BackendError::Failed("ring could not compute the public key".into()))?
            .as_ref()
            .to_vec();
        Ok(Box::new(RingShare { key, algorithm, public }))
    }
}

/// A ring ephemeral key pair: X25519 (32-byte public key) or P-256 (SEC1 uncompressed point),
/// consumed by its one `agree_ephemeral`, which parses and checks the peer's key.
struct RingShare {
    key: agreement::EphemeralPrivateKey,
    algorithm: &'static agreement::Algorithm,
    public: Vec<u8>,
}

impl KeyShare for RingShare {
    fn public_key(&self) -> &[u8] {
        &self.public
    }
    fn derive(self: Box<Self>, peer_public: &[u8]) -> Result<Vec<u8>> {
        let peer = agreement::UnparsedPublicKey::new(self.algorithm, peer_public);
        agreement::agree_ephemeral(self.key, &peer, |secret| secret.to_vec())
            .map_err(|_| BackendError::Failed("ring refused the peer's public key".into()))
    }
}

/// The bit length of the modulus of a DER PKCS#1 `RSAPublicKey` (`SEQUENCE { INTEGER n,
/// INTEGER e }`), or `None` when the bytes are not one.
///
/// This reads two DER headers only, to check the key size at prepare time (`UnparsedPublicKey`
/// parses nothing until `verify`); the key itself is parsed and validated by ring.
fn pkcs1_modulus_bits(der: &[u8]) -> Option<usize> {
    /// Split off one DER element with tag `tag`: `(contents, rest)`.
    fn element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
        let (&t, rest) = input.split_first()?;
        let (&first, mut rest) = rest.split_first()?;
        if t != tag {
            return None;
        }
        let len = if first < 0x80 {
            first as usize
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let (len_bytes, after) = rest.split_at(n);
            rest = after;
            len_bytes.iter().fold(0, |acc, &b| acc << 8 | b as usize)
        };
        (rest.len() >= len).then(|| rest.split_at(len))
    }
    let (seq, trailing) = element(der, 0x30)?;
    let (n, _e) = element(seq, 0x02)?;
    if !trailing.is_empty() {
        return None;
    }
    let start = n.iter().position(|&b| b != 0)?;
    let n = &n[start..];
    Some(n.len() * 8 - n[0].leading_zeros() as usize)
}

/// Check that `public` is a SEC1 uncompressed point (`04||x||y`) for a field of `field_len`
/// bytes, so a wrong key fails at prepare time rather than as "signature invalid" in the loop.
fn check_sec1_point(public: &[u8], curve: &str, field_len: usize) -> Result<()> {
    if public.len() == 1 + 2 * field_len && public[0] == 0x04 {
        Ok(())
    } else {
        Err(BackendError::Failed(format!(
            "{curve} public key must be an uncompressed SEC1 point ({} bytes starting 04), \
             got {} bytes",
            1 + 2 * field_len,
            public.len()
        )))
    }
}

/// Parse an ECDSA key pair from PKCS#8 (ring requires the public key inside the
/// `ECPrivateKey`, which our key files have, and checks that it matches the private scalar).
fn ecdsa_signer(
    alg: &'static EcdsaSigningAlgorithm,
    curve: &str,
    key: &KeyPair,
    rng: SystemRandom,
) -> Result<Box<dyn Signer>> {
    let key = EcdsaKeyPair::from_pkcs8(alg, key.private_pkcs8, &rng).map_err(|e| {
        failed(format!(
            "ring rejected the {curve} private key (PKCS#8): {e}"
        ))
    })?;
    Ok(Box::new(ring_api::EcdsaSigner { key, rng }))
}

/// Verification through `UnparsedPublicKey`; ring reports every failure (bad encoding,
/// wrong length, invalid signature) the same way, so any error means "not valid".
struct RingVerifier(UnparsedPublicKey<Vec<u8>>);

impl Verifier for RingVerifier {
    fn verify(&mut self, msg: &[u8], sig: &[u8]) -> Result<bool> {
        Ok(self.0.verify(msg, sig).is_ok())
    }
}

/// What only this backend has: its crate version, its own DER reading of RSA key sizes, the
/// public key ring derives from the ECDSA PKCS#8 files, the exact reasons it gives, and the
/// verify case whose signature comes from another backend. Everything else (known answers,
/// round trips, tampering, interoperation, what is unsupported) is checked on every backend by
/// `backends::conformance`.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::openssl::OpenSsl;
    use crate::ops::keys;
    use crate::ops::SigFamily;
    use ring::signature::KeyPair as _;

    fn is_unsupported<T>(r: Result<T>) -> bool {
        matches!(r, Err(BackendError::Unsupported(_)))
    }

    #[test]
    fn info_matches_locked_crate_version() {
        crate::backends::assert_locked(&format!("ring {CRATE_VERSION}"));
        let info = Ring.info();
        assert_eq!(
            (info.backend, info.library.as_str(), info.fips),
            ("ring", "ring", false)
        );
        assert_eq!(info.library_version, CRATE_VERSION);
    }

    #[test]
    fn pkcs1_modulus_bits_reads_the_key_files() {
        for bits in [2048, 3072, 4096] {
            let key = keys::signing_key(SigFamily::Rsa(bits));
            assert_eq!(pkcs1_modulus_bits(key.public), Some(bits as usize));
            assert_eq!(pkcs1_modulus_bits(&key.public[..100]), None);
        }
        assert_eq!(pkcs1_modulus_bits(&[]), None);
    }

    #[test]
    fn rsa_sha1_verifies_but_does_not_sign() {
        let key = keys::signing_key(SigFamily::Rsa(2048));
        let alg = SigAlg::Rsa {
            bits: 2048,
            digest: DigestAlg::Sha1,
            padding: RsaPadding::Pkcs1,
        };
        match Ring.signer(alg, &key) {
            Err(BackendError::Unsupported(reason)) => assert_eq!(
                reason,
                "ring cannot make SHA-1 RSA signatures (verification only)"
            ),
            other => panic!("expected Unsupported, got {:?}", other.err()),
        }
        let msg = b"a SHA-1 signature made elsewhere";
        let sig = OpenSsl.signer(alg, &key).unwrap().sign(msg).unwrap();
        let mut v = Ring.verifier(alg, key.public).unwrap();
        assert!(v.verify(msg, &sig).unwrap());
        let mut bad = sig.clone();
        bad[17] ^= 0x80;
        assert!(!v.verify(msg, &bad).unwrap());
        // The prepared verify case takes its signature from another backend and runs.
        let op = crate::ops::Op::parse("rsa2048-verify").unwrap();
        let raw = crate::ops::RawParams {
            digest: Some("sha1".into()),
            ..Default::default()
        };
        let params = crate::ops::Params::resolve(op, &raw).unwrap();
        let mut run = crate::ops::prepare::prepare(&Ring, op, &params).unwrap();
        run().unwrap();
        // SHA-1 PSS is not in ring at all.
        let pss = SigAlg::Rsa {
            bits: 2048,
            digest: DigestAlg::Sha1,
            padding: RsaPadding::Pss,
        };
        assert!(is_unsupported(Ring.signer(pss, &key)));
        assert!(is_unsupported(Ring.verifier(pss, key.public)));
    }

    #[test]
    fn ecdsa_key_pairs_have_the_key_files_public_keys() {
        // ring's key pair from the PKCS#8 file has the public key of the `.pub.raw` file.
        let rng = SystemRandom::new();
        for (alg, family) in [
            (
                &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                SigFamily::EcdsaP256,
            ),
            (
                &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
                SigFamily::EcdsaP384,
            ),
        ] {
            let key = keys::signing_key(family);
            let kp = EcdsaKeyPair::from_pkcs8(alg, key.private_pkcs8, &rng).unwrap();
            assert_eq!(kp.public_key().as_ref(), key.public);
        }
    }

    #[test]
    fn key_agreement_says_why_it_is_unsupported() {
        for alg in [KxAlg::X25519, KxAlg::EcdhP256] {
            let (ours, _) = keys::agreement_keys(alg).unwrap();
            match Ring.agreement(alg, Some(&ours)) {
                Err(BackendError::Unsupported(reason)) => {
                    assert!(reason.contains("ephemeral"), "{reason}")
                }
                _ => panic!("{alg:?} should be unsupported"),
            }
        }
        assert!(is_unsupported(Ring.agreement(KxAlg::Ffdh2048, None)));
    }
}
