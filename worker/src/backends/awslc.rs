//! The AWS-LC backend: AWS-LC through `aws-lc-rs`, its safe Rust API, and through `aws-lc-sys`
//! (AWS-LC's C API) for the two cases that API cannot serve: RSA signatures with SHA-1, and
//! finite-field Diffie-Hellman.
//!
//! Everything that can be done once is done at prepare time, and the hot path calls one
//! `aws-lc-rs` function:
//!
//! - digests: `digest::digest` (one-shot); the digest is copied into the caller's buffer;
//! - HMAC: an `hmac::Key` built once; `hmac::sign_to_buffer` per call, into the caller's buffer;
//! - AEADs: a `LessSafeKey` expanded once; sealing and opening work in place in the caller's
//!   buffer (`seal_in_place_append_tag`, `open_in_place`);
//! - RSA/ECDSA/Ed25519 signing: the key pair parsed once (`RsaKeyPair`, `EcdsaKeyPair`,
//!   `Ed25519KeyPair`); each call hashes the message and signs it, as `aws-lc-rs` always does;
//! - verification: the public key parsed once (`signature::ParsedPublicKey`);
//! - key agreement: our `agreement::PrivateKey` parsed once, and the peer's key parsed only when
//!   it changes (`agreement::ParsedPublicKey`, cloned per call, which only takes a reference);
//! - ML-KEM-512/768/1024: `kem::DecapsulationKey` generated at prepare time (in the timed loop
//!   for `-keygen`), `kem::EncapsulationKey` parsed once; X25519MLKEM768 is composed from this
//!   backend's ML-KEM-768 and X25519 by `backends::hybrid`;
//! - ML-DSA-44/65/87: `signature::PqdsaKeyPair` made from the 32-byte seed once (hedged signing,
//!   AWS-LC's default), the public key parsed once for verification.
//!
//! Deterministic ML-KEM (seeded key generation, encapsulation with a given m) is not in the
//! `aws-lc-rs` API, so the known-answer tests import the ACVP decapsulation key instead
//! (`kem_decapsulator`) and check encapsulation through it.
//!
//! RSA with SHA-1: `aws-lc-rs` can verify PKCS#1 v1.5 with SHA-1
//! (`RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY`) but has no SHA-1 signing encoding and no
//! SHA-1 PSS at all. Those go through `EVP_DigestSign`/`EVP_DigestVerify` with `EVP_sha1()`
//! directly, doing per call what `aws-lc-rs` does for the other digests (initialise a digest
//! context for the key, set the padding, sign or verify), so SHA-1 timings stay comparable with
//! the SHA-2 ones. PKCS#1 v1.5 signing with SHA-1 is used by the key-size study.
//!
//! What this backend reports as "unsupported", and why:
//! - HMAC-SHA3-256 and RSA with SHA3-256: `aws-lc-rs` has no such algorithms;
//! - ECDSA signing other than P-256 with SHA-256 and P-384 with SHA-384 (the only ASN.1 signing
//!   algorithms `aws-lc-rs` offers for these curves), and ECDSA verification with SHA3-256 or
//!   P-384 with SHA-1 (no such verification algorithms);
//!
//! FFDH-2048 (RFC 3526 group 14) is not in `aws-lc-rs` either; it goes through AWS-LC's C API
//! (`DH_generate_key` with a 225-bit private exponent set by `DH_set_length`, as OpenSSL draws
//! for this group; `DH_compute_key_padded` on `BN_get_rfc3526_prime_2048`, which checks the
//! peer's key for its range on every call: AWS-LC's own validation for a group without q).
//!
//! XTS-AES (the `storage` workload's sector encryption) is not in `aws-lc-rs` either: AES-256-XTS
//! goes through AWS-LC's C API (`EVP_aes_256_xts`; one `EVP_CIPHER_CTX` per direction with the
//! key set once, and per sector `EVP_EncryptInit_ex`/`EVP_DecryptInit_ex` with only the IV, then
//! one in-place `EVP_EncryptUpdate`/`EVP_DecryptUpdate` over the data unit, as its header asks:
//! one data unit per key or IV). AWS-LC has no AES-128-XTS (`EVP_aes_256_xts` is its only XTS
//! cipher, in AWS-LC and in the FIPS module alike): "unsupported".

use std::ptr;

use aws_lc_rs::aead::{self, LessSafeKey, UnboundKey};
use aws_lc_rs::agreement;
use aws_lc_rs::digest;
use aws_lc_rs::hmac;
use aws_lc_rs::kem;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, ParsedPublicKey, PqdsaKeyPair,
    PqdsaSigningAlgorithm, RsaEncoding, RsaKeyPair, RsaParameters,
};
// The same calls go to AWS-LC or, in the FIPS worker, to the AWS-LC FIPS module.
#[cfg(feature = "fips")]
use aws_lc_fips_sys as sys;
#[cfg(not(feature = "fips"))]
use aws_lc_sys as sys;

crate::backends::ring_api::ring_api!(aws_lc_rs);

mod c_api;
use c_api::{AwsFfdh, AwsXts, EvpRsa};

use crate::backends::{
    check_aead_key, check_rsa_bits, check_xts_key, failed, hybrid, unsupported, Aead, Agreement,
    Backend, BackendError, Digest, GeneratedSigner, KemDecapsulator, KemEncapsulator,
    LibraryInfo, Mac, PeerCache, Result, SectorCipher, Signer, Verifier, XtsBits,
};
use crate::cpu::{CapVector, Capabilities};
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KemAlg, KxAlg, MlDsaLevel, RsaPadding, SigAlg};

/// The AWS-LC library.
pub struct AwsLc;

#[cfg(target_arch = "x86_64")]
extern "C" {
    /// AWS-LC's capability vector, `uint32_t OPENSSL_ia32cap_P[4]`
    /// (crypto/fipsmodule/cpucap/internal.h), filled by `OPENSSL_cpuid_setup` and then
    /// modified from `OPENSSL_ia32cap` (cpu_intel.c, `handle_cpu_env`). aws-lc-sys prefixes
    /// every symbol with its version; the crate's pregenerated bindings do not declare this
    /// one, so it is declared here (a version bump fails to link rather than read garbage).
    #[cfg_attr(not(feature = "fips"), link_name = "aws_lc_0_47_0_OPENSSL_ia32cap_P")]
    #[cfg_attr(feature = "fips", link_name = "aws_lc_fips_0_14_4_OPENSSL_ia32cap_P")]
    static AWS_LC_IA32CAP_P: [u32; 4];
}

/// The capability vector AWS-LC chooses its code paths from, in this process.
fn cpu_capabilities() -> Capabilities {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: CRYPTO_library_init runs OPENSSL_cpuid_setup once (it is also a constructor);
        // afterwards the array is only read.
        let words = unsafe {
            sys::CRYPTO_library_init();
            ptr::read_volatile(ptr::addr_of!(AWS_LC_IA32CAP_P))
        };
        Capabilities::Vector { vector: CapVector::from_u32s(words), source: "OPENSSL_ia32cap_P" }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Capabilities::NotMaskable("AWS-LC's CPU masks are defined here for x86-64 only".into())
    }
}

/// The binding crates this backend is built from, as locked in `Cargo.lock` (a test keeps this
/// in step).
#[cfg(not(feature = "fips"))]
const CRATE_VERSIONS: &str = "aws-lc-rs 1.19.0, aws-lc-sys 0.47.0";
#[cfg(feature = "fips")]
const CRATE_VERSIONS: &str = "aws-lc-rs 1.19.0, aws-lc-fips-sys 0.14.4";

impl Backend for AwsLc {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "aws-lc",
            library: "AWS-LC".into(),
            // AWS-LC's own version as the linked library reports it (`OpenSSL_version`), then
            // the bindings, whose per-call work is part of what is timed.
            library_version: format!("{} ({CRATE_VERSIONS})", aws_lc_rs::awslc_version()),
            fips: crate::fips::mode("aws-lc"),
            fips_provider: None,
        }
    }

    fn capabilities(&self) -> Capabilities {
        cpu_capabilities()
    }

    fn digest(&self, alg: DigestAlg) -> Result<Box<dyn Digest>> {
        Ok(Box::new(ring_api::Digest(digest_alg(alg))))
    }

    fn hmac(&self, alg: DigestAlg, key: &[u8]) -> Result<Box<dyn Mac>> {
        let algorithm = match alg {
            DigestAlg::Sha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            DigestAlg::Sha256 => hmac::HMAC_SHA256,
            DigestAlg::Sha384 => hmac::HMAC_SHA384,
            DigestAlg::Sha512 => hmac::HMAC_SHA512,
            DigestAlg::Sha3_256 => {
                return unsupported(
                    "aws-lc-rs has no HMAC-SHA3-256 (its HMAC algorithms are SHA-1 and SHA-2)",
                )
            }
        };
        Ok(Box::new(ring_api::Hmac(hmac::Key::new(algorithm, key))))
    }

    fn aead(&self, alg: AeadAlg, key: &[u8]) -> Result<Box<dyn Aead>> {
        check_aead_key(alg, key)?;
        let algorithm = match alg {
            AeadAlg::Aes128Gcm => &aead::AES_128_GCM,
            AeadAlg::Aes256Gcm => &aead::AES_256_GCM,
            AeadAlg::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        };
        let key = UnboundKey::new(algorithm, key).map_err(failed)?;
        Ok(Box::new(ring_api::Aead(LessSafeKey::new(key))))
    }

    fn xts(&self, bits: XtsBits, key: &[u8]) -> Result<Box<dyn SectorCipher>> {
        match bits {
            XtsBits::Aes128 => unsupported(
                "AWS-LC has no AES-128-XTS (EVP_aes_256_xts is its only XTS cipher)",
            ),
            XtsBits::Aes256 => {
                check_xts_key(bits, key)?;
                Ok(Box::new(AwsXts::new(key)?))
            }
        }
    }

    fn signer(&self, alg: SigAlg, key: &KeyPair) -> Result<Box<dyn Signer>> {
        match alg {
            SigAlg::Rsa {
                bits,
                digest: DigestAlg::Sha1,
                padding,
            } => Ok(Box::new(EvpRsa::signer(key.private_pkcs8, bits, padding)?)),
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                let encoding = rsa_encoding(digest, padding)?;
                let key_pair = RsaKeyPair::from_pkcs8(key.private_pkcs8)
                    .map_err(|e| failed(format!("RSA private key is not PKCS#8: {e}")))?;
                let have = RsaParameters::public_modulus_len(key_pair.public_key().as_ref())
                    .map_err(failed)?;
                check_rsa_bits(have as usize, bits)?;
                let sig_len = key_pair.public_modulus_len();
                Ok(Box::new(ring_api::RsaSigner { key: key_pair, encoding, rng: SystemRandom::new(), sig_len }))
            }
            SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest } => {
                let algorithm = match (alg, digest) {
                    (SigAlg::EcdsaP256 { .. }, DigestAlg::Sha256) => {
                        &signature::ECDSA_P256_SHA256_ASN1_SIGNING
                    }
                    (SigAlg::EcdsaP384 { .. }, DigestAlg::Sha384) => {
                        &signature::ECDSA_P384_SHA384_ASN1_SIGNING
                    }
                    _ => {
                        return unsupported(format!(
                            "aws-lc-rs cannot sign ECDSA {} with {digest}: its ASN.1 signing \
                             algorithms are P-256 with SHA-256 and P-384 with SHA-384",
                            curve_name(alg)
                        ))
                    }
                };
                // `from_pkcs8` refuses a key on another curve than the algorithm's.
                let key_pair = EcdsaKeyPair::from_pkcs8(algorithm, key.private_pkcs8)
                    .map_err(|e| failed(format!("{} private key: {e}", curve_name(alg))))?;
                Ok(Box::new(ring_api::EcdsaSigner { key: key_pair, rng: SystemRandom::new() }))
            }
            SigAlg::Ed25519 => {
                // Checks that the public key belongs to the seed.
                let key_pair =
                    Ed25519KeyPair::from_seed_and_public_key(key.private_raw, key.public)
                        .map_err(|e| failed(format!("Ed25519 key pair: {e}")))?;
                Ok(Box::new(ring_api::Ed25519Signer(key_pair)))
            }
            SigAlg::MlDsa(level) => {
                let key_pair = PqdsaKeyPair::from_seed(ml_dsa_signing(level), key.private_raw)
                    .map_err(|e| failed(format!("{} seed: {e}", level.name())))?;
                if key_pair.public_key().as_ref() != key.public {
                    return Err(BackendError::Failed(format!(
                        "{} public key does not belong to the seed",
                        level.name()
                    )));
                }
                Ok(Box::new(AwsMlDsaSigner::new(key_pair)))
            }
        }
    }

    fn verifier(&self, alg: SigAlg, public: &[u8]) -> Result<Box<dyn Verifier>> {
        let algorithm: &'static dyn signature::VerificationAlgorithm = match alg {
            SigAlg::Rsa {
                bits,
                digest: DigestAlg::Sha1,
                padding: RsaPadding::Pss,
            } => return Ok(Box::new(EvpRsa::verifier(public, bits)?)),
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                let params = rsa_parameters(digest, padding)?;
                let have = RsaParameters::public_modulus_len(public)
                    .map_err(|e| failed(format!("RSA public key is not PKCS#1 DER: {e}")))?;
                check_rsa_bits(have as usize, bits)?;
                params
            }
            SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest } => match (alg, digest) {
                (SigAlg::EcdsaP256 { .. }, DigestAlg::Sha1) => &signature::ECDSA_P256_SHA1_ASN1,
                (SigAlg::EcdsaP256 { .. }, DigestAlg::Sha256) => &signature::ECDSA_P256_SHA256_ASN1,
                (SigAlg::EcdsaP256 { .. }, DigestAlg::Sha384) => &signature::ECDSA_P256_SHA384_ASN1,
                (SigAlg::EcdsaP256 { .. }, DigestAlg::Sha512) => &signature::ECDSA_P256_SHA512_ASN1,
                (SigAlg::EcdsaP384 { .. }, DigestAlg::Sha256) => &signature::ECDSA_P384_SHA256_ASN1,
                (SigAlg::EcdsaP384 { .. }, DigestAlg::Sha384) => &signature::ECDSA_P384_SHA384_ASN1,
                (SigAlg::EcdsaP384 { .. }, DigestAlg::Sha512) => &signature::ECDSA_P384_SHA512_ASN1,
                _ => {
                    return unsupported(format!(
                        "aws-lc-rs has no ECDSA {} verification with {digest}",
                        curve_name(alg)
                    ))
                }
            },
            SigAlg::Ed25519 => &signature::ED25519,
            SigAlg::MlDsa(MlDsaLevel::MlDsa44) => &signature::ML_DSA_44,
            SigAlg::MlDsa(MlDsaLevel::MlDsa65) => &signature::ML_DSA_65,
            SigAlg::MlDsa(MlDsaLevel::MlDsa87) => &signature::ML_DSA_87,
        };
        // Parsed (and, for EC, checked to be on the curve) once, not per verification.
        let key = ParsedPublicKey::new(algorithm, public)
            .map_err(|e| failed(format!("public key for {alg:?}: {e}")))?;
        Ok(Box::new(AwsVerifier(key)))
    }

    fn agreement(&self, alg: KxAlg, ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        let algorithm = match alg {
            KxAlg::X25519 => &agreement::X25519,
            KxAlg::EcdhP256 => &agreement::ECDH_P256,
            // Not in aws-lc-rs: AWS-LC's DH through its C API, below.
            KxAlg::Ffdh2048 => return Ok(Box::new(AwsFfdh::generate()?)),
        };
        let key = match (alg, ours) {
            // X25519: the raw 32-byte scalar; P-256: the big-endian 32-byte scalar.
            (_, Some(ours)) => agreement::PrivateKey::from_private_key(algorithm, ours.private_raw)
                .map_err(|e| failed(format!("{alg:?} private key: {e}")))?,
            // A fresh key pair: X25519 (`x25519-keygen`, the hybrid's key shares) or P-256 (an
            // ephemeral ECDH share, e.g. IKE's KE payload).
            (_, None) => agreement::PrivateKey::generate(algorithm).map_err(failed)?,
        };
        // X25519: 32 raw bytes; P-256: SEC1 uncompressed point, the encoding of the key files.
        let public = key.compute_public_key().map_err(failed)?.as_ref().to_vec();
        Ok(Box::new(AwsAgreement {
            key,
            algorithm,
            public,
            peer: PeerCache::new(),
        }))
    }

    fn kem_keypair(&self, alg: KemAlg) -> Result<Box<dyn KemDecapsulator>> {
        let Some(algorithm) = kem_alg(alg) else {
            return hybrid::keypair(self);
        };
        let dk = kem::DecapsulationKey::generate(algorithm).map_err(failed)?;
        // Encoding ek is part of FIPS 203 key generation (and what a TLS client sends).
        let ek = dk
            .encapsulation_key()
            .and_then(|ek| ek.key_bytes())
            .map_err(failed)?
            .as_ref()
            .to_vec();
        Ok(Box::new(AwsKemDecapsulator { dk, ek, alg }))
    }

    fn kem_encapsulator(
        &self,
        alg: KemAlg,
        encapsulation_key: &[u8],
    ) -> Result<Box<dyn KemEncapsulator>> {
        let Some(algorithm) = kem_alg(alg) else {
            return hybrid::encapsulator(self, encapsulation_key);
        };
        let ek = kem::EncapsulationKey::new(algorithm, encapsulation_key).map_err(|e| {
            failed(format!(
                "{} encapsulation key ({} bytes): {e}",
                alg.display(),
                encapsulation_key.len()
            ))
        })?;
        Ok(Box::new(AwsKemEncapsulator(ek, alg)))
    }

    fn kem_decapsulator(&self, alg: KemAlg, dk: &[u8]) -> Result<Box<dyn KemDecapsulator>> {
        let Some(algorithm) = kem_alg(alg) else {
            return unsupported("X25519MLKEM768 keys are imported as their two halves");
        };
        let k = alg.rank();
        let ek = dk
            .get(384 * k..768 * k + 32)
            .ok_or_else(|| BackendError::Failed(format!("{} decapsulation key too short", alg.display())))?
            .to_vec();
        let dk = kem::DecapsulationKey::new(algorithm, dk)
            .map_err(|e| failed(format!("{} decapsulation key: {e}", alg.display())))?;
        Ok(Box::new(AwsKemDecapsulator { dk, ek, alg }))
    }

    fn sig_keygen(&self, alg: SigAlg, seed: Option<&[u8]>) -> Result<GeneratedSigner> {
        let SigAlg::MlDsa(level) = alg else {
            return unsupported(format!("no key generation for {alg:?} in cryptoperf"));
        };
        let key_pair = match seed {
            None => PqdsaKeyPair::generate(ml_dsa_signing(level)).map_err(failed)?,
            Some(seed) => PqdsaKeyPair::from_seed(ml_dsa_signing(level), seed)
                .map_err(|e| failed(format!("{} seed: {e}", level.name())))?,
        };
        let public = key_pair.public_key().as_ref().to_vec();
        Ok(GeneratedSigner { signer: Box::new(AwsMlDsaSigner::new(key_pair)), public })
    }
}

/// The `aws-lc-rs` ML-KEM algorithm; `None` for the hybrid, composed by `backends::hybrid`.
fn kem_alg(alg: KemAlg) -> Option<&'static kem::Algorithm> {
    match alg {
        KemAlg::MlKem512 => Some(&kem::ML_KEM_512),
        KemAlg::MlKem768 => Some(&kem::ML_KEM_768),
        KemAlg::MlKem1024 => Some(&kem::ML_KEM_1024),
        KemAlg::X25519MlKem768 => None,
    }
}

/// The `aws-lc-rs` ML-DSA signing algorithm of a parameter set.
fn ml_dsa_signing(level: MlDsaLevel) -> &'static PqdsaSigningAlgorithm {
    match level {
        MlDsaLevel::MlDsa44 => &signature::ML_DSA_44_SIGNING,
        MlDsaLevel::MlDsa65 => &signature::ML_DSA_65_SIGNING,
        MlDsaLevel::MlDsa87 => &signature::ML_DSA_87_SIGNING,
    }
}

/// The `aws-lc-rs` digest of a [`DigestAlg`] (it has all five).
fn digest_alg(alg: DigestAlg) -> &'static digest::Algorithm {
    match alg {
        DigestAlg::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
        DigestAlg::Sha256 => &digest::SHA256,
        DigestAlg::Sha384 => &digest::SHA384,
        DigestAlg::Sha512 => &digest::SHA512,
        DigestAlg::Sha3_256 => &digest::SHA3_256,
    }
}

/// "P-256" or "P-384", for messages.
fn curve_name(alg: SigAlg) -> &'static str {
    match alg {
        SigAlg::EcdsaP384 { .. } => "P-384",
        _ => "P-256",
    }
}

/// The `aws-lc-rs` RSA signing encoding for SHA-2 digests (PSS: MGF1 with the same digest, salt
/// length = digest length). SHA-1 is signed through [`EvpRsa`] instead.
fn rsa_encoding(digest: DigestAlg, padding: RsaPadding) -> Result<&'static dyn RsaEncoding> {
    Ok(match (digest, padding) {
        (DigestAlg::Sha256, RsaPadding::Pkcs1) => &signature::RSA_PKCS1_SHA256,
        (DigestAlg::Sha384, RsaPadding::Pkcs1) => &signature::RSA_PKCS1_SHA384,
        (DigestAlg::Sha512, RsaPadding::Pkcs1) => &signature::RSA_PKCS1_SHA512,
        (DigestAlg::Sha256, RsaPadding::Pss) => &signature::RSA_PSS_SHA256,
        (DigestAlg::Sha384, RsaPadding::Pss) => &signature::RSA_PSS_SHA384,
        (DigestAlg::Sha512, RsaPadding::Pss) => &signature::RSA_PSS_SHA512,
        (DigestAlg::Sha1, _) => unreachable!("RSA with SHA-1 is signed through EvpRsa"),
        (DigestAlg::Sha3_256, _) => {
            return unsupported("aws-lc-rs has no RSA signatures with SHA3-256")
        }
    })
}

/// The `aws-lc-rs` RSA verification parameters (2048 to 8192-bit keys). SHA-1 PSS is verified
/// through [`EvpRsa`] instead.
fn rsa_parameters(digest: DigestAlg, padding: RsaPadding) -> Result<&'static RsaParameters> {
    Ok(match (digest, padding) {
        (DigestAlg::Sha1, RsaPadding::Pkcs1) => {
            &signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY
        }
        (DigestAlg::Sha256, RsaPadding::Pkcs1) => &signature::RSA_PKCS1_2048_8192_SHA256,
        (DigestAlg::Sha384, RsaPadding::Pkcs1) => &signature::RSA_PKCS1_2048_8192_SHA384,
        (DigestAlg::Sha512, RsaPadding::Pkcs1) => &signature::RSA_PKCS1_2048_8192_SHA512,
        (DigestAlg::Sha256, RsaPadding::Pss) => &signature::RSA_PSS_2048_8192_SHA256,
        (DigestAlg::Sha384, RsaPadding::Pss) => &signature::RSA_PSS_2048_8192_SHA384,
        (DigestAlg::Sha512, RsaPadding::Pss) => &signature::RSA_PSS_2048_8192_SHA512,
        (DigestAlg::Sha1, RsaPadding::Pss) => unreachable!("SHA-1 PSS is verified through EvpRsa"),
        (DigestAlg::Sha3_256, _) => {
            return unsupported("aws-lc-rs has no RSA signatures with SHA3-256")
        }
    })
}

/// Verification with a public key parsed once.
struct AwsVerifier(ParsedPublicKey);

impl Verifier for AwsVerifier {
    fn verify(&mut self, msg: &[u8], sig: &[u8]) -> Result<bool> {
        // `aws-lc-rs` reports a malformed signature and an invalid one alike.
        Ok(self.0.verify_sig(msg, sig).is_ok())
    }
}

/// Our private key, and the last peer key seen, parsed (and checked) only when it changes, as
/// the other backends do (its parsed key keeps its bytes).
struct AwsAgreement {
    key: agreement::PrivateKey,
    algorithm: &'static agreement::Algorithm,
    public: Vec<u8>,
    peer: PeerCache<agreement::ParsedPublicKey>,
}

impl Agreement for AwsAgreement {
    fn public_key(&self) -> Vec<u8> {
        self.public.clone()
    }

    fn derive(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        let peer = self.peer.get_or_parse(peer_public, |bytes| {
            let unparsed = agreement::UnparsedPublicKey::new(self.algorithm, bytes);
            agreement::ParsedPublicKey::try_from(unparsed)
                .map_err(|e| failed(format!("peer public key: {e}")))
        })?;
        // `agree` consumes the parsed key; a clone only takes a reference on the EVP_PKEY.
        agreement::agree(&self.key, peer.clone(), (), |secret| Ok(secret.to_vec()))
            .map_err(|()| BackendError::Failed("key agreement failed (invalid peer key?)".into()))
    }

    fn derive_validated(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        self.peer.forget();
        self.derive(peer_public)
    }
}

/// An ML-KEM decapsulation key (generated or imported), with its encoded encapsulation key.
struct AwsKemDecapsulator {
    dk: kem::DecapsulationKey,
    ek: Vec<u8>,
    alg: KemAlg,
}

impl KemDecapsulator for AwsKemDecapsulator {
    fn encapsulation_key(&self) -> Vec<u8> {
        self.ek.clone()
    }

    fn decaps(&mut self, ciphertext: &[u8]) -> Result<Vec<u8>> {
        let secret = self
            .dk
            .decapsulate(kem::Ciphertext::from(ciphertext))
            .map_err(|_| {
                BackendError::Failed(format!(
                    "{} decapsulation failed ({}-byte ciphertext; {} expected)",
                    self.alg.display(),
                    ciphertext.len(),
                    self.alg.lens().1
                ))
            })?;
        Ok(secret.as_ref().to_vec())
    }

    fn decapsulation_key(&self) -> Result<Vec<u8>> {
        Ok(self.dk.key_bytes().map_err(failed)?.as_ref().to_vec())
    }
}

/// ML-KEM encapsulation with the peer's parsed encapsulation key.
struct AwsKemEncapsulator(kem::EncapsulationKey, KemAlg);

impl KemEncapsulator for AwsKemEncapsulator {
    fn encaps(&mut self) -> Result<(Vec<u8>, Vec<u8>)> {
        let (ct, secret) = self.0.encapsulate().map_err(|_| {
            BackendError::Failed(format!("{} encapsulation failed", self.1.display()))
        })?;
        Ok((ct.as_ref().to_vec(), secret.as_ref().to_vec()))
    }
}

/// ML-DSA signing (hedged: AWS-LC draws the 32-byte rnd of FIPS 204 Algorithm 2 per call).
struct AwsMlDsaSigner {
    key_pair: PqdsaKeyPair,
    sig_len: usize,
}

impl AwsMlDsaSigner {
    fn new(key_pair: PqdsaKeyPair) -> Self {
        let sig_len = key_pair.algorithm().signature_len();
        AwsMlDsaSigner { key_pair, sig_len }
    }
}

impl Signer for AwsMlDsaSigner {
    fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        let mut sig = vec![0; self.sig_len];
        let n = self
            .key_pair
            .sign(msg, &mut sig)
            .map_err(|e| failed(format!("ML-DSA signing failed: {e}")))?;
        sig.truncate(n);
        Ok(sig)
    }
}

/// What only this backend has: the library version it reports and the crate versions it names.
/// Everything else (known answers, round trips, tampering, interoperation, what is unsupported)
/// is checked on every backend by `backends::conformance`.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_reports_runtime_version_and_locked_crates() {
        let info = AwsLc.info();
        assert_eq!(info.backend, "aws-lc");
        assert_eq!(info.library, "AWS-LC");
        assert!(
            info.library_version
                .starts_with(|c: char| c.is_ascii_digit()),
            "{}",
            info.library_version
        );
        assert!(info
            .library_version
            .ends_with(&format!("({CRATE_VERSIONS})")));
        // FIPS mode exactly in the FIPS build (the AWS-LC FIPS module), never otherwise.
        assert_eq!(info.fips, cfg!(feature = "fips"));
        crate::backends::assert_locked(CRATE_VERSIONS);
    }
}

#[cfg(test)]
mod capability_tests {
    use super::*;

    #[test]
    fn reads_the_vector_aws_lc_uses() {
        // The link name of AWS_LC_IA32CAP_P carries aws-lc-sys's version.
        let linked = if cfg!(feature = "fips") { "aws-lc-fips-sys 0.14.4" } else { "aws-lc-sys 0.47.0" };
        assert!(CRATE_VERSIONS.ends_with(linked), "update the link_name of AWS_LC_IA32CAP_P");
        let caps = AwsLc.capabilities();
        let Capabilities::Vector { vector, source } = caps else {
            if cfg!(target_arch = "x86_64") {
                panic!("no capability vector on x86-64: {caps:?}");
            }
            return;
        };
        assert_eq!(source, "OPENSSL_ia32cap_P");
        if std::env::var_os(crate::cpu::MASK_ENV).is_none() {
            let hw = CapVector::from_cpuid().unwrap();
            for f in ["aes", "pclmulqdq", "sha"] {
                assert_eq!(vector.has(f), hw.has(f), "{f}");
            }
        }
    }
}
