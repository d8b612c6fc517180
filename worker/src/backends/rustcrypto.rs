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
//! XTS-AES-128/256 (the `storage` workload's sector encryption): `xts-mode`'s `Xts128` over two
//! `aes` block ciphers (Key1 for the data, Key2 for the tweak), key schedules expanded once;
//! a sector is one `encrypt_sector`/`decrypt_sector` call in place.
//!
//! What RustCrypto cannot do here, and says so as "unsupported":
//! - FFDH (there is no maintained finite-field Diffie-Hellman crate);
//! - ECDSA P-384 with SHA-1: `ecdsa` refuses a prehash shorter than half the field size
//!   (20 < 24 bytes), though FIPS 186 allows it.

use hmac::digest::{Digest as HashFn, FixedOutputReset};
use rand_core::OsRng;

use super::{
    check_aead_key, check_rsa_bits, check_xts_key, check_xts_unit, failed, hybrid, split_tag, to_array, unsupported, xts_tweak, Aead, Agreement,
    Backend, BackendError, Digest, GeneratedSigner, KemDecapsulator, KemEncapsulator,
    LibraryInfo, Mac, PeerCache, PeerKey, Result, SectorCipher, Signer, Verifier, XtsBits,
};
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KemAlg, KxAlg, MlDsaLevel, RsaPadding, SigAlg};

/// The RustCrypto library.
pub struct RustCrypto;

/// The crates this backend is built from, as locked in `Cargo.lock` (a test keeps this in step).
const CRATE_VERSIONS: &str = "rsa 0.9.10, p256 0.13.2, p384 0.13.1, sha1 0.10.7, sha2 0.10.9, \
     sha3 0.10.9, hmac 0.12.1, aes-gcm 0.10.3, chacha20poly1305 0.10.1, ed25519-dalek 2.2.0, \
     x25519-dalek 2.0.1, ml-kem 0.2.3, ml-dsa 0.1.2, aes 0.8.4, xts-mode 0.5.1";

/// Run `$body` with the type alias `$T` bound to the type named beside the pattern that
/// `$value` matches (or evaluate `$other`'s expression, for a value bound to no type): the one
/// dispatch the `with_*` macros below share, each giving only its table.
macro_rules! with_type {
    ($value:expr, $T:ident => $body:expr, { $($pat:pat => $ty:ty),+ $(,)? } $(, $other:pat => $otherwise:expr)?) => {
        match $value {
            $($pat => {
                type $T = $ty;
                $body
            })+
            $($other => $otherwise,)?
        }
    };
}

/// Run `$body` with the type alias `$K` bound to the `ml-kem` type of an ML-KEM `$alg`, or
/// evaluate `$hybrid` for X25519MLKEM768.
macro_rules! with_ml_kem {
    ($alg:expr, $K:ident => $body:expr, hybrid => $hybrid:expr) => {
        with_type!($alg, $K => $body, {
            KemAlg::MlKem512 => ml_kem::MlKem512,
            KemAlg::MlKem768 => ml_kem::MlKem768,
            KemAlg::MlKem1024 => ml_kem::MlKem1024,
        }, KemAlg::X25519MlKem768 => $hybrid)
    };
}

/// Run `$body` with the type alias `$P` bound to the `ml-dsa` parameter set of `$level`.
macro_rules! with_ml_dsa {
    ($level:expr, $P:ident => $body:expr) => {
        with_type!($level, $P => $body, {
            MlDsaLevel::MlDsa44 => ml_dsa::MlDsa44,
            MlDsaLevel::MlDsa65 => ml_dsa::MlDsa65,
            MlDsaLevel::MlDsa87 => ml_dsa::MlDsa87,
        })
    };
}

/// Run `$body` with the type alias `$D` bound to the RustCrypto hash type of `$alg`.
macro_rules! with_digest {
    ($alg:expr, $D:ident => $body:expr) => {
        with_type!($alg, $D => $body, {
            DigestAlg::Sha1 => sha1::Sha1,
            DigestAlg::Sha256 => sha2::Sha256,
            DigestAlg::Sha384 => sha2::Sha384,
            DigestAlg::Sha512 => sha2::Sha512,
            DigestAlg::Sha3_256 => sha3::Sha3_256,
        })
    };
}

impl Backend for RustCrypto {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "rustcrypto",
            library: "RustCrypto".into(),
            library_version: CRATE_VERSIONS.into(),
            fips: false,
            fips_provider: None,
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
        check_aead_key(alg, key)?;
        let bad_key = |_| BackendError::Failed(format!("RustCrypto refused the {} key", alg.name()));
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

    fn xts(&self, bits: XtsBits, key: &[u8]) -> Result<Box<dyn SectorCipher>> {
        use aes::cipher::KeyInit;
        check_xts_key(bits, key)?;
        let (k1, k2) = key.split_at(key.len() / 2);
        Ok(match bits {
            XtsBits::Aes128 => Box::new(RcXts(xts_mode::Xts128::new(
                aes::Aes128::new_from_slice(k1).map_err(failed)?,
                aes::Aes128::new_from_slice(k2).map_err(failed)?,
            ))),
            XtsBits::Aes256 => Box::new(RcXts(xts_mode::Xts128::new(
                aes::Aes256::new_from_slice(k1).map_err(failed)?,
                aes::Aes256::new_from_slice(k2).map_err(failed)?,
            ))),
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
                let seed: [u8; 32] = to_array("Ed25519 seed", key.private_raw)?;
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
                let bytes: [u8; 32] = to_array("Ed25519 public key", public)?;
                let key = ed25519_dalek::VerifyingKey::from_bytes(&bytes).map_err(failed)?;
                Ok(verifier::<_, ed25519_dalek::Signature>(key))
            }
            SigAlg::MlDsa(level) => with_ml_dsa!(level, P => ml_dsa_rc::verifier::<P>(public)),
        }
    }

    fn agreement(&self, alg: KxAlg, ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        match alg {
            KxAlg::X25519 => {
                let secret = match ours {
                    Some(ours) => {
                        let scalar: [u8; 32] = to_array("X25519 private key", ours.private_raw)?;
                        x25519_dalek::StaticSecret::from(scalar)
                    }
                    // A fresh key pair (`x25519-keygen`, the hybrid's key shares).
                    None => x25519_dalek::StaticSecret::random_from_rng(OsRng),
                };
                let public = x25519_dalek::PublicKey::from(&secret);
                Ok(Box::new(X25519Agreement { secret, public }))
            }
            KxAlg::EcdhP256 => {
                let secret = match ours {
                    Some(ours) => ec_secret_p256(ours.private_pkcs8)?,
                    // A fresh key pair (an ephemeral ECDH share, e.g. IKE's KE payload).
                    None => p256::SecretKey::random(&mut OsRng),
                };
                Ok(Box::new(EcdhP256Agreement { secret, peer: PeerCache::new() }))
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
/// XTS over two expanded AES keys (`xts-mode`).
struct RcXts<C: aes::cipher::BlockEncrypt + aes::cipher::BlockDecrypt + aes::cipher::BlockCipher>(xts_mode::Xts128<C>);

impl<C: aes::cipher::BlockEncrypt + aes::cipher::BlockDecrypt + aes::cipher::BlockCipher> SectorCipher for RcXts<C> {
    fn encrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        // (xts-mode panics on a unit shorter than a block: checked first.)
        check_xts_unit(buf)?;
        self.0.encrypt_sector(buf, xts_tweak(sector));
        Ok(())
    }
    fn decrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        check_xts_unit(buf)?;
        self.0.decrypt_sector(buf, xts_tweak(sector));
        Ok(())
    }
}

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
        let (ciphertext, tag) = split_tag(sealed)?;
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

impl<F: FnMut(&[u8]) -> Result<Vec<u8>> + Send> Signer for FnSigner<F> {
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
    K: signature::RandomizedSigner<S> + Send + 'static,
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
            pub(super) fn signer<D: HashFn + FixedOutputReset + Send + 'static>(
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
        let peer: [u8; 32] = to_array("X25519 public key", peer_public)?;
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
    peer: PeerCache<PeerKey<p256::PublicKey>>,
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
        let peer = &self
            .peer
            .get_or_parse(peer_public, |bytes| {
                Ok(PeerKey::new(bytes, p256::PublicKey::from_sec1_bytes(bytes).map_err(failed)?))
            })?
            .key;
        let shared = p256::ecdh::diffie_hellman(self.secret.to_nonzero_scalar(), peer.as_affine());
        Ok(shared.raw_secret_bytes().to_vec())
    }

    fn derive_validated(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        self.peer.forget();
        self.derive(peer_public)
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

/// What only this backend has: the crate versions it names, and ML-DSA internals the trait does
/// not expose (deterministic signing, the expanded private key). Everything else (known answers,
/// round trips, tampering, interoperation, what is unsupported) is checked on every backend by
/// `backends::conformance`.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_lists_locked_crate_versions() {
        crate::backends::assert_locked(CRATE_VERSIONS);
        assert_eq!(RustCrypto.info().library, "RustCrypto");
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
}
