//! The RustCrypto backend: the pure-Rust crates of the RustCrypto project (and the dalek
//! crates for Curve25519).
//!
//! As in the other backends, keys are parsed and expanded at prepare time; the hot path holds
//! the parsed key and reuses hash/MAC states (`finalize_reset`) and the caller's output buffer.
//!
//! Post-quantum: `ml-kem` 0.2 (ML-KEM-512/768/1024, with its `deterministic` feature for seeded
//! key generation and encapsulation in the known-answer tests) and `ml-dsa` 0.1 (ML-DSA-44/65/87,
//! hedged signing with the OS random generator, as FIPS 204 recommends). X25519MLKEM768 is
//! composed from this backend's ML-KEM-768 and X25519 by `backends::hybrid`.
//!
//! What RustCrypto cannot do here, and says so as "unsupported":
//! - FFDH (there is no maintained finite-field Diffie-Hellman crate);
//! - ECDSA P-384 with SHA-1: `ecdsa` refuses a prehash shorter than half the field size
//!   (20 < 24 bytes), though FIPS 186 allows it.

use hmac::digest::{Digest as HashFn, FixedOutputReset};
use rand_core::OsRng;

use super::{
    failed, hybrid, unsupported, Aead, Agreement, Backend, BackendError, Digest,
    GeneratedSigner, KemDecapsulator, KemEncapsulator, LibraryInfo, Mac, Result, Signer,
    Verifier,
};
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KemAlg, KxAlg, MlDsaLevel, RsaPadding, SigAlg};

/// The RustCrypto library.
pub struct RustCrypto;

/// The crates this backend is built from, as locked in `Cargo.lock` (a test keeps this in step).
const CRATE_VERSIONS: &str = "rsa 0.9.10, p256 0.13.2, p384 0.13.1, sha1 0.10.7, sha2 0.10.9, \
     sha3 0.10.9, hmac 0.12.1, aes-gcm 0.10.3, chacha20poly1305 0.10.1, ed25519-dalek 2.2.0, \
     x25519-dalek 2.0.1, ml-kem 0.2.3, ml-dsa 0.1.2";

/// Run `$body` with the type alias `$K` bound to the `ml-kem` type of an ML-KEM `$alg`, or
/// evaluate `$hybrid` for X25519MLKEM768.
macro_rules! with_ml_kem {
    ($alg:expr, $K:ident => $body:expr, hybrid => $hybrid:expr) => {
        match $alg {
            KemAlg::MlKem512 => {
                type $K = ml_kem::MlKem512;
                $body
            }
            KemAlg::MlKem768 => {
                type $K = ml_kem::MlKem768;
                $body
            }
            KemAlg::MlKem1024 => {
                type $K = ml_kem::MlKem1024;
                $body
            }
            KemAlg::X25519MlKem768 => $hybrid,
        }
    };
}

/// Run `$body` with the type alias `$P` bound to the `ml-dsa` parameter set of `$level`.
macro_rules! with_ml_dsa {
    ($level:expr, $P:ident => $body:expr) => {
        match $level {
            MlDsaLevel::MlDsa44 => {
                type $P = ml_dsa::MlDsa44;
                $body
            }
            MlDsaLevel::MlDsa65 => {
                type $P = ml_dsa::MlDsa65;
                $body
            }
            MlDsaLevel::MlDsa87 => {
                type $P = ml_dsa::MlDsa87;
                $body
            }
        }
    };
}

/// Run `$body` with the type alias `$D` bound to the RustCrypto hash type of `$alg`.
macro_rules! with_digest {
    ($alg:expr, $D:ident => $body:expr) => {
        match $alg {
            DigestAlg::Sha1 => {
                type $D = sha1::Sha1;
                $body
            }
            DigestAlg::Sha256 => {
                type $D = sha2::Sha256;
                $body
            }
            DigestAlg::Sha384 => {
                type $D = sha2::Sha384;
                $body
            }
            DigestAlg::Sha512 => {
                type $D = sha2::Sha512;
                $body
            }
            DigestAlg::Sha3_256 => {
                type $D = sha3::Sha3_256;
                $body
            }
        }
    };
}

impl Backend for RustCrypto {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "rustcrypto",
            library: "RustCrypto".into(),
            library_version: CRATE_VERSIONS.into(),
            fips: false,
        }
    }

    fn digest(&self, alg: DigestAlg) -> Result<Box<dyn Digest>> {
        with_digest!(alg, D => Ok(Box::new(RcDigest(D::new()))))
    }

    fn hmac(&self, alg: DigestAlg, key: &[u8]) -> Result<Box<dyn Mac>> {
        with_digest!(alg, D => {
            let mac = <hmac::Hmac<D> as hmac::Mac>::new_from_slice(key).map_err(failed)?;
            Ok(Box::new(RcHmac(mac)))
        })
    }

    fn aead(&self, alg: AeadAlg, key: &[u8]) -> Result<Box<dyn Aead>> {
        use aes_gcm::aead::KeyInit;
        let bad_key = |_| {
            BackendError::Failed(format!(
                "{} takes a {}-byte key, got {} bytes",
                alg.name(),
                alg.key_len(),
                key.len()
            ))
        };
        Ok(match alg {
            AeadAlg::Aes128Gcm => Box::new(RcAead(
                aes_gcm::Aes128Gcm::new_from_slice(key).map_err(bad_key)?,
            )),
            AeadAlg::Aes256Gcm => Box::new(RcAead(
                aes_gcm::Aes256Gcm::new_from_slice(key).map_err(bad_key)?,
            )),
            AeadAlg::ChaCha20Poly1305 => Box::new(RcAead(
                chacha20poly1305::ChaCha20Poly1305::new_from_slice(key).map_err(bad_key)?,
            )),
        })
    }

    fn signer(&self, alg: SigAlg, key: &KeyPair) -> Result<Box<dyn Signer>> {
        match alg {
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                let key = rsa_private_key(key.private_pkcs8, bits)?;
                with_digest!(digest, D => Ok(match padding {
                    RsaPadding::Pkcs1 => {
                        randomized_signer(rsa::pkcs1v15::SigningKey::<D>::new(key))
                    }
                    RsaPadding::Pss => randomized_signer(rsa::pss::SigningKey::<D>::new(key)),
                }))
            }
            SigAlg::EcdsaP256 { digest } => {
                with_digest!(digest, D => ecdsa_p256::signer::<D>(key))
            }
            SigAlg::EcdsaP384 { digest } => {
                with_digest!(digest, D => ecdsa_p384::signer::<D>(key))
            }
            SigAlg::Ed25519 => {
                let seed: [u8; 32] = key.private_raw.try_into().map_err(|_| {
                    BackendError::Failed(format!(
                        "Ed25519 seed must be 32 bytes, got {}",
                        key.private_raw.len()
                    ))
                })?;
                let key = ed25519_dalek::SigningKey::from_bytes(&seed);
                Ok(Box::new(FnSigner(move |msg: &[u8]| {
                    let sig: ed25519_dalek::Signature = signature::Signer::sign(&key, msg);
                    Ok(sig.to_bytes().to_vec())
                })))
            }
            SigAlg::MlDsa(level) => with_ml_dsa!(level, P => {
                let (signer, public) = ml_dsa_rc::from_seed::<P>(key.private_raw)?;
                if public != key.public {
                    return Err(BackendError::Failed(format!(
                        "{} public key does not belong to the seed",
                        level.name()
                    )));
                }
                Ok(signer)
            }),
        }
    }

    fn verifier(&self, alg: SigAlg, public: &[u8]) -> Result<Box<dyn Verifier>> {
        match alg {
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                use rsa::pkcs1::DecodeRsaPublicKey;
                let key = rsa::RsaPublicKey::from_pkcs1_der(public).map_err(failed)?;
                check_rsa_bits(rsa::traits::PublicKeyParts::size(&key) * 8, bits)?;
                with_digest!(digest, D => Ok(match padding {
                    RsaPadding::Pkcs1 => verifier::<_, rsa::pkcs1v15::Signature>(
                        rsa::pkcs1v15::VerifyingKey::<D>::new(key),
                    ),
                    RsaPadding::Pss => verifier::<_, rsa::pss::Signature>(
                        rsa::pss::VerifyingKey::<D>::new(key),
                    ),
                }))
            }
            SigAlg::EcdsaP256 { digest } => {
                with_digest!(digest, D => ecdsa_p256::verifier::<D>(public))
            }
            SigAlg::EcdsaP384 { digest } => {
                with_digest!(digest, D => ecdsa_p384::verifier::<D>(public))
            }
            SigAlg::Ed25519 => {
                let bytes: [u8; 32] = public.try_into().map_err(|_| {
                    BackendError::Failed(format!(
                        "Ed25519 public key must be 32 bytes, got {}",
                        public.len()
                    ))
                })?;
                let key = ed25519_dalek::VerifyingKey::from_bytes(&bytes).map_err(failed)?;
                Ok(verifier::<_, ed25519_dalek::Signature>(key))
            }
            SigAlg::MlDsa(level) => with_ml_dsa!(level, P => ml_dsa_rc::verifier::<P>(public)),
        }
    }

    fn agreement(&self, alg: KxAlg, ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        let need_ours = || BackendError::Failed(format!("{alg:?} needs our key pair (got none)"));
        match alg {
            KxAlg::X25519 => {
                let secret = match ours {
                    Some(ours) => {
                        let scalar: [u8; 32] = ours.private_raw.try_into().map_err(|_| {
                            BackendError::Failed(format!(
                                "X25519 private key must be 32 bytes, got {}",
                                ours.private_raw.len()
                            ))
                        })?;
                        x25519_dalek::StaticSecret::from(scalar)
                    }
                    // A fresh key pair (`x25519-keygen`, the hybrid's key shares).
                    None => x25519_dalek::StaticSecret::random_from_rng(OsRng),
                };
                let public = x25519_dalek::PublicKey::from(&secret);
                Ok(Box::new(X25519Agreement { secret, public }))
            }
            KxAlg::EcdhP256 => {
                let ours = ours.ok_or_else(need_ours)?;
                let secret = ec_secret_p256(ours.private_pkcs8)?;
                Ok(Box::new(EcdhP256Agreement { secret, peer: None }))
            }
            KxAlg::Ffdh2048 => unsupported("RustCrypto has no FFDH (finite-field Diffie-Hellman)"),
        }
    }

    fn kem_keypair(&self, alg: KemAlg) -> Result<Box<dyn KemDecapsulator>> {
        use ml_kem::KemCore;
        with_ml_kem!(alg, K => {
            let (dk, ek) = K::generate(&mut OsRng);
            Ok(RcKemDecapsulator::<K>::boxed(dk, &ek, alg))
        }, hybrid => hybrid::keypair(self))
    }

    fn kem_keypair_from_seed(
        &self,
        alg: KemAlg,
        d: &[u8; 32],
        z: &[u8; 32],
    ) -> Result<Box<dyn KemDecapsulator>> {
        use ml_kem::KemCore;
        with_ml_kem!(alg, K => {
            let (dk, ek) = K::generate_deterministic(&(*d).into(), &(*z).into());
            Ok(RcKemDecapsulator::<K>::boxed(dk, &ek, alg))
        }, hybrid => unsupported("X25519MLKEM768 keys are generated as their two halves"))
    }

    fn kem_decapsulator(&self, alg: KemAlg, dk: &[u8]) -> Result<Box<dyn KemDecapsulator>> {
        use ml_kem::{EncodedSizeUser, KemCore};
        with_ml_kem!(alg, K => {
            type Dk = <K as KemCore>::DecapsulationKey;
            let encoded = ml_kem::Encoded::<Dk>::try_from(dk).map_err(|_| {
                BackendError::Failed(format!("{} decapsulation key of {} bytes", alg.display(), dk.len()))
            })?;
            let k = alg.rank();
            Ok(Box::new(RcKemDecapsulator::<K> {
                dk: Dk::from_bytes(&encoded),
                ek: dk[384 * k..768 * k + 32].to_vec(),
                alg,
            }) as Box<dyn KemDecapsulator>)
        }, hybrid => unsupported("X25519MLKEM768 keys are imported as their two halves"))
    }

    fn kem_encapsulator(
        &self,
        alg: KemAlg,
        encapsulation_key: &[u8],
    ) -> Result<Box<dyn KemEncapsulator>> {
        use ml_kem::{EncodedSizeUser, KemCore};
        with_ml_kem!(alg, K => {
            type Ek = <K as KemCore>::EncapsulationKey;
            let encoded = ml_kem::Encoded::<Ek>::try_from(encapsulation_key).map_err(|_| {
                BackendError::Failed(format!(
                    "{} encapsulation key must be {} bytes, got {}",
                    alg.display(),
                    alg.lens().0,
                    encapsulation_key.len()
                ))
            })?;
            Ok(Box::new(RcKemEncapsulator::<K> { ek: Ek::from_bytes(&encoded), alg })
                as Box<dyn KemEncapsulator>)
        }, hybrid => hybrid::encapsulator(self, encapsulation_key))
    }

    fn sig_keygen(&self, alg: SigAlg, seed: Option<&[u8]>) -> Result<GeneratedSigner> {
        let SigAlg::MlDsa(level) = alg else {
            return unsupported(format!("no key generation for {alg:?} in cryptoperf"));
        };
        with_ml_dsa!(level, P => {
            let (signer, public) = match seed {
                Some(seed) => ml_dsa_rc::from_seed::<P>(seed)?,
                None => ml_dsa_rc::generate::<P>(),
            };
            Ok(GeneratedSigner { signer, public })
        })
    }
}

/// ML-DSA through `ml-dsa` 0.1: pure ML-DSA, empty context; hedged signing draws the 32-byte
/// rnd from the OS (`getrandom`'s `SysRng`, the generator `ml-dsa` itself uses for keys).
mod ml_dsa_rc {
    use super::*;
    use ml_dsa::common::getrandom::SysRng;
    use ml_dsa::{Generate, MlDsaParams, SigningKey, VerifyingKey};

    /// The signer and encoded public key of `SigningKey::from_seed` (ML-DSA.KeyGen_internal).
    pub(super) fn from_seed<P: MlDsaParams + 'static>(seed: &[u8]) -> Result<(Box<dyn Signer>, Vec<u8>)> {
        let seed = ml_dsa::Seed::try_from(seed).map_err(|_| {
            BackendError::Failed(format!("ML-DSA seed must be 32 bytes, got {}", seed.len()))
        })?;
        Ok(boxed(SigningKey::<P>::from_seed(&seed)))
    }

    /// A key pair from a fresh random seed (ML-DSA.KeyGen), the timed part of `-keygen`.
    pub(super) fn generate<P: MlDsaParams + 'static>() -> (Box<dyn Signer>, Vec<u8>) {
        boxed(SigningKey::<P>::generate())
    }

    fn boxed<P: MlDsaParams + 'static>(key: SigningKey<P>) -> (Box<dyn Signer>, Vec<u8>) {
        let public = AsRef::<VerifyingKey<P>>::as_ref(&key).encode().to_vec();
        let signer = FnSigner(move |msg: &[u8]| {
            let sig = key
                .expanded_key()
                .sign_randomized(msg, &[], &mut SysRng)
                .map_err(failed)?;
            Ok(sig.encode().to_vec())
        });
        (Box::new(signer), public)
    }

    /// A verifier of the FIPS 204 encoded public key.
    pub(super) fn verifier<P: MlDsaParams + 'static>(public: &[u8]) -> Result<Box<dyn Verifier>> {
        let encoded = ml_dsa::EncodedVerifyingKey::<P>::try_from(public).map_err(|_| {
            BackendError::Failed(format!("ML-DSA public key of {} bytes", public.len()))
        })?;
        let key = VerifyingKey::<P>::decode(&encoded);
        Ok(Box::new(FnVerifier(move |msg: &[u8], sig: &[u8]| {
            match ml_dsa::Signature::<P>::try_from(sig) {
                Ok(sig) => key.verify_with_context(msg, &[], &sig),
                Err(_) => false,
            }
        })))
    }

    /// The deterministic signature (rnd = 0), for the tests against the computed vectors.
    #[cfg(test)]
    pub(super) fn sign_deterministic<P: MlDsaParams>(seed: &[u8], msg: &[u8]) -> Vec<u8> {
        let key = SigningKey::<P>::from_seed(&ml_dsa::Seed::try_from(seed).unwrap());
        key.expanded_key().sign_deterministic(msg, &[]).unwrap().encode().to_vec()
    }
}

/// Parse an RSA private key (PKCS#8) and check its size.
fn rsa_private_key(der: &[u8], bits: u32) -> Result<rsa::RsaPrivateKey> {
    use rsa::pkcs8::DecodePrivateKey;
    let key = rsa::RsaPrivateKey::from_pkcs8_der(der)
        .map_err(|e| failed(format!("RSA private key is not PKCS#8: {e}")))?;
    check_rsa_bits(rsa::traits::PublicKeyParts::size(&key) * 8, bits)?;
    Ok(key)
}

/// Refuse a key whose size is not the one the algorithm names.
fn check_rsa_bits(have: usize, want: u32) -> Result<()> {
    if have == want as usize {
        Ok(())
    } else {
        Err(BackendError::Failed(format!(
            "RSA key has {have} bits, expected {want}"
        )))
    }
}

/// Parse a P-256 private key from PKCS#8 DER.
fn ec_secret_p256(der: &[u8]) -> Result<p256::SecretKey> {
    use p256::pkcs8::DecodePrivateKey;
    p256::SecretKey::from_pkcs8_der(der)
        .map_err(|e| failed(format!("P-256 private key is not PKCS#8: {e}")))
}

/// A hash whose state is reset, not rebuilt, after each call.
struct RcDigest<D>(D);

impl<D: HashFn + FixedOutputReset> Digest for RcDigest<D> {
    fn digest(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        HashFn::update(&mut self.0, data);
        out.clear();
        out.extend_from_slice(&HashFn::finalize_reset(&mut self.0));
        Ok(())
    }
}

/// HMAC keyed once; `finalize_reset` returns it to the keyed state.
struct RcHmac<M>(M);

impl<M: hmac::Mac + FixedOutputReset> Mac for RcHmac<M> {
    fn mac(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        hmac::Mac::update(&mut self.0, data);
        out.clear();
        out.extend_from_slice(&hmac::Mac::finalize_reset(&mut self.0).into_bytes());
        Ok(())
    }
}

/// An AEAD with its key expanded, working in place in the caller's buffer.
struct RcAead<A>(A);

impl<A: aes_gcm::aead::AeadInPlace> Aead for RcAead<A> {
    fn seal(
        &mut self,
        nonce: &[u8; 12],
        aad: &[u8],
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        out.extend_from_slice(plaintext);
        let nonce = aes_gcm::aead::Nonce::<A>::from_slice(nonce);
        let tag = self
            .0
            .encrypt_in_place_detached(nonce, aad, out)
            .map_err(failed)?;
        out.extend_from_slice(&tag);
        Ok(())
    }

    fn open(
        &mut self,
        nonce: &[u8; 12],
        aad: &[u8],
        sealed: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        let Some(n) = sealed.len().checked_sub(AeadAlg::TAG_LEN) else {
            return Err(BackendError::Failed(
                "sealed message is shorter than the tag".into(),
            ));
        };
        let (ciphertext, tag) = sealed.split_at(n);
        out.extend_from_slice(ciphertext);
        let nonce = aes_gcm::aead::Nonce::<A>::from_slice(nonce);
        let tag = aes_gcm::aead::Tag::<A>::from_slice(tag);
        if self
            .0
            .decrypt_in_place_detached(nonce, aad, out, tag)
            .is_err()
        {
            out.clear();
            return Err(BackendError::Failed(
                "authentication failed (tag mismatch)".into(),
            ));
        }
        Ok(())
    }
}

/// A signer made of a closure holding the parsed key.
struct FnSigner<F>(F);

impl<F: FnMut(&[u8]) -> Result<Vec<u8>>> Signer for FnSigner<F> {
    fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        (self.0)(msg)
    }
}

/// A verifier made of a closure holding the parsed key; the closure says whether the signature
/// is valid.
struct FnVerifier<F>(F);

impl<F: FnMut(&[u8], &[u8]) -> bool> Verifier for FnVerifier<F> {
    fn verify(&mut self, msg: &[u8], sig: &[u8]) -> Result<bool> {
        Ok((self.0)(msg, sig))
    }
}

/// A signer for a key that signs with fresh randomness from the OS (RSA: PKCS#1 v1.5 with
/// blinding, PSS with a random salt).
fn randomized_signer<K, S>(key: K) -> Box<dyn Signer>
where
    K: signature::RandomizedSigner<S> + 'static,
    S: signature::SignatureEncoding,
{
    Box::new(FnSigner(move |msg: &[u8]| {
        let sig = key.try_sign_with_rng(&mut OsRng, msg).map_err(failed)?;
        Ok(sig.to_vec())
    }))
}

/// A verifier for a key that takes the message itself; a signature that does not even parse is
/// simply not valid.
fn verifier<K, S>(key: K) -> Box<dyn Verifier>
where
    K: signature::Verifier<S> + 'static,
    S: for<'a> TryFrom<&'a [u8]>,
{
    Box::new(FnVerifier(
        move |msg: &[u8], sig: &[u8]| match S::try_from(sig) {
            Ok(sig) => key.verify(msg, &sig).is_ok(),
            Err(_) => false,
        },
    ))
}

/// ECDSA over one curve with any digest: the message is hashed with the requested digest and
/// the hash signed with `sign_prehash` (RFC 6979 nonces); signatures are DER.
macro_rules! ecdsa_for_curve {
    ($module:ident, $curve:ident, $name:literal, $field_len:literal) => {
        /// ECDSA on
        #[doc = $name]
        mod $module {
            use super::*;
            use signature::hazmat::{PrehashSigner, PrehashVerifier};
            use $curve::ecdsa::{Signature, SigningKey, VerifyingKey};

            /// Field size in bytes; `ecdsa` refuses a prehash shorter than half of it.
            const FIELD_LEN: usize = $field_len;

            fn check_digest<D: HashFn>() -> Result<()> {
                let len = <D as HashFn>::output_size();
                if len < FIELD_LEN / 2 {
                    return unsupported(format!(
                        "RustCrypto's ecdsa refuses a {len}-byte hash on {}: a prehash must be \
                         at least half the field size ({} bytes)",
                        $name,
                        FIELD_LEN / 2
                    ));
                }
                Ok(())
            }

            /// Parse the private key (PKCS#8) into a signer.
            pub(super) fn signer<D: HashFn + FixedOutputReset + 'static>(
                key: &KeyPair,
            ) -> Result<Box<dyn Signer>> {
                use $curve::pkcs8::DecodePrivateKey;
                check_digest::<D>()?;
                let secret = $curve::SecretKey::from_pkcs8_der(key.private_pkcs8)
                    .map_err(|e| failed(format!("{} private key is not PKCS#8: {e}", $name)))?;
                let key = SigningKey::from(secret);
                let mut hasher = D::new();
                Ok(Box::new(FnSigner(move |msg: &[u8]| {
                    HashFn::update(&mut hasher, msg);
                    let hash = HashFn::finalize_reset(&mut hasher);
                    let sig: Signature = key.sign_prehash(&hash).map_err(failed)?;
                    Ok(sig.to_der().as_bytes().to_vec())
                })))
            }

            /// Parse the SEC1 public point into a verifier of DER signatures.
            pub(super) fn verifier<D: HashFn + FixedOutputReset + 'static>(
                public: &[u8],
            ) -> Result<Box<dyn Verifier>> {
                check_digest::<D>()?;
                let key = VerifyingKey::from_sec1_bytes(public).map_err(failed)?;
                let mut hasher = D::new();
                Ok(Box::new(FnVerifier(move |msg: &[u8], sig: &[u8]| {
                    let Ok(sig) = Signature::from_der(sig) else {
                        return false;
                    };
                    HashFn::update(&mut hasher, msg);
                    let hash = HashFn::finalize_reset(&mut hasher);
                    key.verify_prehash(&hash, &sig).is_ok()
                })))
            }
        }
    };
}

ecdsa_for_curve!(ecdsa_p256, p256, "P-256", 32);
ecdsa_for_curve!(ecdsa_p384, p384, "P-384", 48);

/// X25519 with a reusable (static) secret.
struct X25519Agreement {
    secret: x25519_dalek::StaticSecret,
    public: x25519_dalek::PublicKey,
}

impl Agreement for X25519Agreement {
    fn public_key(&self) -> Vec<u8> {
        self.public.as_bytes().to_vec()
    }

    fn derive(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        let peer: [u8; 32] = peer_public.try_into().map_err(|_| {
            BackendError::Failed(format!(
                "X25519 public key must be 32 bytes, got {}",
                peer_public.len()
            ))
        })?;
        let shared = self
            .secret
            .diffie_hellman(&x25519_dalek::PublicKey::from(peer));
        // As OpenSSL does (RFC 7748 §6.1 allows it): refuse the all-zero secret a
        // small-order peer key produces.
        if !shared.was_contributory() {
            return Err(BackendError::Failed(
                "X25519 peer key has small order (all-zero shared secret)".into(),
            ));
        }
        Ok(shared.as_bytes().to_vec())
    }
}

/// ECDH on P-256; the peer's point is parsed (and checked on the curve) only when it changes.
struct EcdhP256Agreement {
    secret: p256::SecretKey,
    peer: Option<(Vec<u8>, p256::PublicKey)>,
}

impl Agreement for EcdhP256Agreement {
    fn public_key(&self) -> Vec<u8> {
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        self.secret
            .public_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec()
    }

    fn derive(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        if self
            .peer
            .as_ref()
            .is_none_or(|(bytes, _)| bytes.as_slice() != peer_public)
        {
            self.peer = None;
            let key = p256::PublicKey::from_sec1_bytes(peer_public).map_err(failed)?;
            self.peer = Some((peer_public.to_vec(), key));
        }
        let (_, peer) = self.peer.as_ref().expect("set just above");
        let shared = p256::ecdh::diffie_hellman(self.secret.to_nonzero_scalar(), peer.as_affine());
        Ok(shared.raw_secret_bytes().to_vec())
    }
}

/// An ML-KEM decapsulation key (generated or imported), with its encoded encapsulation key.
struct RcKemDecapsulator<K: ml_kem::KemCore> {
    dk: K::DecapsulationKey,
    ek: Vec<u8>,
    alg: KemAlg,
}

impl<K: ml_kem::KemCore + 'static> RcKemDecapsulator<K> {
    /// Encoding ek is part of FIPS 203 key generation (and what a TLS client sends).
    fn boxed(dk: K::DecapsulationKey, ek: &K::EncapsulationKey, alg: KemAlg) -> Box<dyn KemDecapsulator> {
        use ml_kem::EncodedSizeUser;
        Box::new(RcKemDecapsulator::<K> { dk, ek: ek.as_bytes().to_vec(), alg })
    }
}

impl<K: ml_kem::KemCore> KemDecapsulator for RcKemDecapsulator<K> {
    fn encapsulation_key(&self) -> Vec<u8> {
        self.ek.clone()
    }

    fn decaps(&mut self, ciphertext: &[u8]) -> Result<Vec<u8>> {
        use ml_kem::kem::Decapsulate;
        let ct = ml_kem::Ciphertext::<K>::try_from(ciphertext).map_err(|_| {
            BackendError::Failed(format!(
                "{} ciphertext must be {} bytes, got {}",
                self.alg.display(),
                self.alg.lens().1,
                ciphertext.len()
            ))
        })?;
        let shared = self.dk.decapsulate(&ct).map_err(|_| {
            BackendError::Failed(format!("{} decapsulation failed", self.alg.display()))
        })?;
        Ok(shared.to_vec())
    }

    fn decapsulation_key(&self) -> Result<Vec<u8>> {
        use ml_kem::EncodedSizeUser;
        Ok(self.dk.as_bytes().to_vec())
    }
}

/// ML-KEM encapsulation with the peer's parsed encapsulation key.
struct RcKemEncapsulator<K: ml_kem::KemCore> {
    ek: K::EncapsulationKey,
    alg: KemAlg,
}

impl<K: ml_kem::KemCore> KemEncapsulator for RcKemEncapsulator<K> {
    fn encaps(&mut self) -> Result<(Vec<u8>, Vec<u8>)> {
        use ml_kem::kem::Encapsulate;
        let (ct, shared) = self.ek.encapsulate(&mut OsRng).map_err(|_| {
            BackendError::Failed(format!("{} encapsulation failed", self.alg.display()))
        })?;
        Ok((ct.to_vec(), shared.to_vec()))
    }

    fn encaps_with(&mut self, m: &[u8; 32]) -> Result<(Vec<u8>, Vec<u8>)> {
        use ml_kem::EncapsulateDeterministic;
        let (ct, shared) = self.ek.encapsulate_deterministic(&(*m).into()).map_err(|_| {
            BackendError::Failed(format!("{} encapsulation failed", self.alg.display()))
        })?;
        Ok((ct.to_vec(), shared.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::keys::{self, X25519_ALICE, X25519_BOB};
    use crate::ops::SigFamily;

    const NONCE: [u8; 12] = [7; 12];

    #[test]
    fn info_lists_locked_crate_versions() {
        // Keep CRATE_VERSIONS in step with Cargo.lock.
        let lock = include_str!("../../Cargo.lock");
        for entry in CRATE_VERSIONS.split(", ") {
            let (name, version) = entry.split_once(' ').unwrap();
            let needle = format!("name = \"{name}\"\nversion = \"{version}\"\n");
            assert!(
                lock.contains(&needle),
                "Cargo.lock does not lock {name} {version}"
            );
        }
        assert_eq!(RustCrypto.info().library, "RustCrypto");
    }

    #[test]
    fn digests_known_answers() {
        // FIPS 180-4 / FIPS 202 examples: the message "abc". Confirmed with
        // `printf abc | openssl dgst -<alg>`.
        let cases = [
            (DigestAlg::Sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                DigestAlg::Sha256,
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                DigestAlg::Sha3_256,
                "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532",
            ),
        ];
        for (alg, want) in cases {
            let mut d = RustCrypto.digest(alg).unwrap();
            let mut out = Vec::new();
            for _ in 0..3 {
                d.digest(b"abc", &mut out).unwrap();
                assert_eq!(hex::encode(&out), want, "{alg}");
            }
        }
        for alg in DigestAlg::ALL {
            let mut out = Vec::new();
            RustCrypto
                .digest(alg)
                .unwrap()
                .digest(&[0x5a; 1000], &mut out)
                .unwrap();
            assert_eq!(out.len(), alg.output_len());
        }
    }

    #[test]
    fn hmac_rfc4231_case2() {
        // RFC 4231 §4.3, test case 2 (key "Jefe"). Confirmed with
        // `printf 'what do ya want for nothing?' | openssl dgst -sha256 -hmac Jefe`.
        let mut m = RustCrypto.hmac(DigestAlg::Sha256, b"Jefe").unwrap();
        let mut out = Vec::new();
        for _ in 0..3 {
            m.mac(b"what do ya want for nothing?", &mut out).unwrap();
            assert_eq!(
                hex::encode(&out),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            );
        }
        for alg in DigestAlg::ALL {
            RustCrypto
                .hmac(alg, &[1; 32])
                .unwrap()
                .mac(b"x", &mut out)
                .unwrap();
            assert_eq!(out.len(), alg.output_len(), "{alg}");
        }
    }

    #[test]
    fn aead_round_trips() {
        for alg in [
            AeadAlg::Aes128Gcm,
            AeadAlg::Aes256Gcm,
            AeadAlg::ChaCha20Poly1305,
        ] {
            let key = vec![0x42; alg.key_len()];
            let mut a = RustCrypto.aead(alg, &key).unwrap();
            for (aad, len) in [(&b""[..], 0), (&b""[..], 1024), (&b"header"[..], 33)] {
                let pt: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let (mut sealed, mut opened) = (Vec::new(), Vec::new());
                a.seal(&NONCE, aad, &pt, &mut sealed).unwrap();
                assert_eq!(sealed.len(), len + 16);
                a.open(&NONCE, aad, &sealed, &mut opened).unwrap();
                assert_eq!(opened, pt);
                let mut bad = sealed.clone();
                bad[0] ^= 1;
                assert!(a.open(&NONCE, aad, &bad, &mut opened).is_err());
                assert!(opened.is_empty());
                assert!(a.open(&NONCE, b"other", &sealed, &mut opened).is_err());
                assert!(a.open(&NONCE, aad, &sealed[..10], &mut opened).is_err());
            }
            assert!(RustCrypto.aead(alg, &[0; 5]).is_err());
        }
    }

    fn sig_round_trip(alg: SigAlg, family: SigFamily) {
        let key = keys::signing_key(family);
        let mut s = RustCrypto.signer(alg, &key).unwrap();
        let mut v = RustCrypto.verifier(alg, key.public).unwrap();
        let msg = b"cryptoperf sign/verify round trip";
        for _ in 0..2 {
            let sig = s.sign(msg).unwrap();
            assert!(v.verify(msg, &sig).unwrap(), "{alg:?}");
            assert!(
                !v.verify(b"cryptoperf sign/verify round trip!", &sig)
                    .unwrap(),
                "{alg:?}"
            );
            let mut bad = sig.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            assert!(!v.verify(msg, &bad).unwrap(), "{alg:?}");
            assert!(!v.verify(msg, &sig[..sig.len() - 1]).unwrap(), "{alg:?}");
        }
    }

    #[test]
    fn rsa_round_trips() {
        for bits in [2048, 3072, 4096] {
            for digest in DigestAlg::ALL {
                for padding in [RsaPadding::Pkcs1, RsaPadding::Pss] {
                    sig_round_trip(
                        SigAlg::Rsa {
                            bits,
                            digest,
                            padding,
                        },
                        SigFamily::Rsa(bits),
                    );
                }
            }
        }
        let bad = SigAlg::Rsa {
            bits: 3072,
            digest: DigestAlg::Sha256,
            padding: RsaPadding::Pkcs1,
        };
        assert!(RustCrypto
            .signer(bad, &keys::signing_key(SigFamily::Rsa(2048)))
            .is_err());
    }

    #[test]
    fn ecdsa_round_trips() {
        for digest in DigestAlg::ALL {
            sig_round_trip(SigAlg::EcdsaP256 { digest }, SigFamily::EcdsaP256);
            if digest != DigestAlg::Sha1 {
                sig_round_trip(SigAlg::EcdsaP384 { digest }, SigFamily::EcdsaP384);
            }
        }
        let p384_sha1 = SigAlg::EcdsaP384 {
            digest: DigestAlg::Sha1,
        };
        let key = keys::signing_key(SigFamily::EcdsaP384);
        assert!(matches!(
            RustCrypto.signer(p384_sha1, &key),
            Err(BackendError::Unsupported(_))
        ));
        assert!(matches!(
            RustCrypto.verifier(p384_sha1, key.public),
            Err(BackendError::Unsupported(_))
        ));
    }

    #[test]
    fn ed25519_rfc8032_test1() {
        sig_round_trip(SigAlg::Ed25519, SigFamily::Ed25519);
        // RFC 8032 §7.1 TEST 1: the empty message (confirmed with pyca/cryptography).
        let key = keys::signing_key(SigFamily::Ed25519);
        let want = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155\
                    5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
        let mut s = RustCrypto.signer(SigAlg::Ed25519, &key).unwrap();
        assert_eq!(hex::encode(s.sign(b"").unwrap()), want);
        let mut v = RustCrypto.verifier(SigAlg::Ed25519, key.public).unwrap();
        assert!(v.verify(b"", &hex::decode(want).unwrap()).unwrap());
    }

    /// Signatures made here verify under OpenSSL and the other way round (the full
    /// cross-backend check is `crate::kat`'s; this catches parameter mismatches early).
    #[test]
    fn signatures_interoperate_with_openssl() {
        use crate::backends::openssl::OpenSsl;
        let mut cases = vec![(SigAlg::Ed25519, SigFamily::Ed25519)];
        for digest in DigestAlg::ALL {
            for padding in [RsaPadding::Pkcs1, RsaPadding::Pss] {
                cases.push((
                    SigAlg::Rsa {
                        bits: 2048,
                        digest,
                        padding,
                    },
                    SigFamily::Rsa(2048),
                ));
            }
            cases.push((SigAlg::EcdsaP256 { digest }, SigFamily::EcdsaP256));
            if digest != DigestAlg::Sha1 {
                cases.push((SigAlg::EcdsaP384 { digest }, SigFamily::EcdsaP384));
            }
        }
        let msg = b"interop";
        for (alg, family) in cases {
            let key = keys::signing_key(family);
            let ours = RustCrypto.signer(alg, &key).unwrap().sign(msg).unwrap();
            assert!(
                OpenSsl
                    .verifier(alg, key.public)
                    .unwrap()
                    .verify(msg, &ours)
                    .unwrap(),
                "{alg:?}"
            );
            let theirs = OpenSsl.signer(alg, &key).unwrap().sign(msg).unwrap();
            assert!(
                RustCrypto
                    .verifier(alg, key.public)
                    .unwrap()
                    .verify(msg, &theirs)
                    .unwrap(),
                "{alg:?}"
            );
        }
    }

    #[test]
    fn aead_interoperates_with_openssl() {
        use crate::backends::openssl::OpenSsl;
        for alg in [
            AeadAlg::Aes128Gcm,
            AeadAlg::Aes256Gcm,
            AeadAlg::ChaCha20Poly1305,
        ] {
            let key: Vec<u8> = (0..alg.key_len() as u8).collect();
            let pt: Vec<u8> = (0..100u8).collect();
            let (mut ours, mut theirs, mut out) = (Vec::new(), Vec::new(), Vec::new());
            RustCrypto
                .aead(alg, &key)
                .unwrap()
                .seal(&NONCE, b"ad", &pt, &mut ours)
                .unwrap();
            OpenSsl
                .aead(alg, &key)
                .unwrap()
                .seal(&NONCE, b"ad", &pt, &mut theirs)
                .unwrap();
            assert_eq!(ours, theirs, "{alg:?}");
            OpenSsl
                .aead(alg, &key)
                .unwrap()
                .open(&NONCE, b"ad", &ours, &mut out)
                .unwrap();
            assert_eq!(out, pt);
        }
    }

    #[test]
    fn x25519_rfc7748() {
        let mut alice = RustCrypto
            .agreement(KxAlg::X25519, Some(&X25519_ALICE))
            .unwrap();
        let mut bob = RustCrypto
            .agreement(KxAlg::X25519, Some(&X25519_BOB))
            .unwrap();
        assert_eq!(alice.public_key(), X25519_ALICE.public);
        assert_eq!(bob.public_key(), X25519_BOB.public);
        // RFC 7748 §6.1 shared secret K. Confirmed with `openssl pkeyutl -derive`.
        let k = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";
        assert_eq!(hex::encode(alice.derive(X25519_BOB.public).unwrap()), k);
        assert_eq!(hex::encode(bob.derive(X25519_ALICE.public).unwrap()), k);
        assert!(
            alice.derive(&[0; 32]).is_err(),
            "a small-order peer key must be refused"
        );
    }

    #[test]
    fn ecdh_p256_agrees() {
        let (ours, peer) = keys::agreement_keys(KxAlg::EcdhP256).unwrap();
        let mut a = RustCrypto.agreement(KxAlg::EcdhP256, Some(&ours)).unwrap();
        let mut b = RustCrypto.agreement(KxAlg::EcdhP256, Some(&peer)).unwrap();
        assert_eq!(a.public_key(), ours.public);
        assert_eq!(b.public_key(), peer.public);
        let s = a.derive(peer.public).unwrap();
        assert_eq!(s.len(), 32);
        assert_eq!(s, b.derive(ours.public).unwrap());
        assert_eq!(s, a.derive(peer.public).unwrap());
        let mut off_curve = peer.public.to_vec();
        off_curve[40] ^= 1;
        assert!(a.derive(&off_curve).is_err());
        // The same secret as OpenSSL's.
        let mut o = crate::backends::openssl::OpenSsl
            .agreement(KxAlg::EcdhP256, Some(&ours))
            .unwrap();
        assert_eq!(s, o.derive(peer.public).unwrap());
    }

    #[test]
    fn no_ffdh() {
        assert!(matches!(
            RustCrypto.agreement(KxAlg::Ffdh2048, None),
            Err(BackendError::Unsupported(_))
        ));
    }

    #[test]
    fn ml_kem_768_agrees() {
        let mut dk = RustCrypto.kem_keypair(KemAlg::MlKem768).unwrap();
        let ek = dk.encapsulation_key();
        assert_eq!(ek.len(), 1184);
        let mut enc = RustCrypto.kem_encapsulator(KemAlg::MlKem768, &ek).unwrap();
        for _ in 0..2 {
            let (ct, k) = enc.encaps().unwrap();
            assert_eq!((ct.len(), k.len()), (1088, 32));
            assert_eq!(dk.decaps(&ct).unwrap(), k);
            // FIPS 203 implicit rejection: a tampered ciphertext gives another key, no error.
            let mut bad = ct.clone();
            bad[0] ^= 1;
            assert_ne!(dk.decaps(&bad).unwrap(), k);
        }
        assert!(dk.decaps(&[0; 10]).is_err());
        assert!(RustCrypto
            .kem_encapsulator(KemAlg::MlKem768, &ek[..100])
            .is_err());
    }

    #[test]
    fn ml_kem_all_parameter_sets_agree() {
        for alg in [KemAlg::MlKem512, KemAlg::MlKem768, KemAlg::MlKem1024, KemAlg::X25519MlKem768] {
            let (ek_len, ct_len, ss_len) = alg.lens();
            let mut dk = RustCrypto.kem_keypair(alg).unwrap();
            let ek = dk.encapsulation_key();
            assert_eq!(ek.len(), ek_len, "{alg:?}");
            let (ct, k) = RustCrypto.kem_encapsulator(alg, &ek).unwrap().encaps().unwrap();
            assert_eq!((ct.len(), k.len()), (ct_len, ss_len), "{alg:?}");
            assert_eq!(dk.decaps(&ct).unwrap(), k, "{alg:?}");
        }
    }

    /// Seeded key generation and encapsulation with m reproduce the vector files (the same
    /// checks `crate::kat` makes, here against the crate directly).
    #[test]
    fn ml_kem_vectors() {
        use crate::kat::vectors;
        use sha2::Digest as _;
        for alg in [KemAlg::MlKem512, KemAlg::MlKem768, KemAlg::MlKem1024] {
            let v = vectors::ml_kem(alg);
            let kp = RustCrypto.kem_keypair_from_seed(alg, &v.keygen_d, &v.keygen_z).unwrap();
            assert_eq!(sha2::Sha256::digest(kp.encapsulation_key()).to_vec(), v.keygen_ek_sha256);
            let dk = kp.decapsulation_key().unwrap();
            assert_eq!(sha2::Sha256::digest(&dk).to_vec(), v.keygen_dk_sha256);
            let (ct, k) = RustCrypto
                .kem_encapsulator(alg, v.ek(alg.rank()))
                .unwrap()
                .encaps_with(&v.m)
                .unwrap();
            assert_eq!((ct, k.clone()), (v.c.clone(), v.k.clone()), "{alg:?}");
            let mut imported = RustCrypto.kem_decapsulator(alg, &v.dk).unwrap();
            assert_eq!(imported.decaps(&v.c).unwrap(), k);
            assert_eq!(imported.decapsulation_key().unwrap(), v.dk);
        }
    }

    /// The ML-DSA vectors were computed with dilithium-py; RustCrypto's ml-dsa, which shares no
    /// code with it, reproduces the public key, the expanded private key and the deterministic
    /// signature byte for byte.
    #[test]
    fn ml_dsa_vectors() {
        use crate::kat::vectors;
        use sha2::Digest as _;
        for level in MlDsaLevel::ALL {
            let v = vectors::ml_dsa(level);
            let (pk_len, sig_len) = level.lens();
            assert_eq!((v.pk.len(), v.sig_abc.len()), (pk_len, sig_len));
            let seeded = RustCrypto.sig_keygen(SigAlg::MlDsa(level), Some(&v.seed)).unwrap();
            assert_eq!(seeded.public, v.pk, "{level:?}");
            let (sig, sk) = with_ml_dsa!(level, P => {
                let key = ml_dsa::SigningKey::<P>::from_seed(&ml_dsa::Seed::try_from(v.seed.as_slice()).unwrap());
                #[allow(deprecated)]
                let sk = key.expanded_key().to_expanded().to_vec();
                (ml_dsa_rc::sign_deterministic::<P>(&v.seed, b"abc"), sk)
            });
            assert_eq!(sig, v.sig_abc, "{level:?}");
            assert_eq!(sha2::Sha256::digest(&sk).to_vec(), v.sk_sha256, "{level:?}");
        }
    }

    #[test]
    fn ml_dsa_round_trips_and_interoperates_with_aws_lc() {
        use crate::backends::awslc::AwsLc;
        for level in MlDsaLevel::ALL {
            let alg = SigAlg::MlDsa(level);
            sig_round_trip(alg, SigFamily::MlDsa(level));
            let key = keys::signing_key(SigFamily::MlDsa(level));
            let ours = RustCrypto.signer(alg, &key).unwrap().sign(b"interop").unwrap();
            // Hedged: two signatures of the same message differ.
            assert_ne!(ours, RustCrypto.signer(alg, &key).unwrap().sign(b"interop").unwrap());
            assert!(AwsLc.verifier(alg, key.public).unwrap().verify(b"interop", &ours).unwrap());
            let theirs = AwsLc.signer(alg, &key).unwrap().sign(b"interop").unwrap();
            assert!(RustCrypto.verifier(alg, key.public).unwrap().verify(b"interop", &theirs).unwrap());
            // A generated key pair works across the two libraries too.
            let mut g = RustCrypto.sig_keygen(alg, None).unwrap();
            let sig = g.signer.sign(b"x").unwrap();
            assert!(AwsLc.verifier(alg, &g.public).unwrap().verify(b"x", &sig).unwrap());
            // A seed that does not match the public key is refused.
            let mut wrong = key;
            wrong.public = keys::signing_key(SigFamily::MlDsa(level)).public;
            let other_seed = [7u8; 32];
            wrong.private_raw = &other_seed;
            assert!(RustCrypto.signer(alg, &wrong).is_err());
        }
    }

    #[test]
    fn x25519_generated_keys() {
        let mut a = RustCrypto.agreement(KxAlg::X25519, None).unwrap();
        let mut b = RustCrypto.agreement(KxAlg::X25519, None).unwrap();
        assert_ne!(a.public_key(), b.public_key());
        assert_eq!(a.derive(&b.public_key()).unwrap(), b.derive(&a.public_key()).unwrap());
    }
}
