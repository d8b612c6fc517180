//! The adapters of ring's API, which aws-lc-rs mirrors module for module (`digest`, `hmac`,
//! `aead::LessSafeKey`, `signature::{RsaKeyPair, EcdsaKeyPair, Ed25519KeyPair}`, with the same
//! calls): one body, expanded once per crate by [`ring_api!`] in `ring.rs` and `awslc.rs`, so
//! the two backends time the same calls in the same way and cannot drift apart.
//!
//! Each expansion is a module `ring_api` inside the backend's file, holding:
//!
//! - `Digest(&'static digest::Algorithm)`: the one-shot `digest::digest`, copied into the
//!   caller's buffer;
//! - `Hmac(hmac::Key)`: the key prepared once (inner and outer states); `hmac::sign` per call;
//! - `Aead(LessSafeKey)`: the key expanded once; sealing and opening in place in the caller's
//!   buffer (`seal_in_place_append_tag`, `open_in_place`); a failed open leaves no plaintext;
//! - `RsaSigner`, `EcdsaSigner`, `Ed25519Signer`: key pairs parsed once, one `SystemRandom` kept
//!   for the RSA-PSS salt and blinding and the ECDSA nonce.
//!
//! What differs between the two crates (verification, key agreement, the algorithms each has)
//! stays in the backend files.

/// Expand the ring-API adapters over the crate `$krate` (`ring` or `aws_lc_rs`) as a module
/// `ring_api` at the call site.
macro_rules! ring_api {
    ($krate:ident) => {
        /// The ring-API adapters (`backends::ring_api`) over this backend's crate.
        mod ring_api {
            use crate::backends::{split_tag, BackendError, Result};
            use ::$krate::aead::{Aad, LessSafeKey, Nonce};
            use ::$krate::rand::SystemRandom;
            use ::$krate::signature::{EcdsaKeyPair, Ed25519KeyPair, RsaEncoding, RsaKeyPair};
            use ::$krate::{digest, hmac};

            /// A one-shot digest.
            pub(super) struct Digest(pub(super) &'static digest::Algorithm);

            impl crate::backends::Digest for Digest {
                fn digest(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
                    out.clear();
                    out.extend_from_slice(digest::digest(self.0, data).as_ref());
                    Ok(())
                }
            }

            /// HMAC with the key prepared once.
            pub(super) struct Hmac(pub(super) hmac::Key);

            impl crate::backends::Mac for Hmac {
                fn mac(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
                    out.clear();
                    out.extend_from_slice(hmac::sign(&self.0, data).as_ref());
                    Ok(())
                }
            }

            /// An AEAD with its key expanded, working in place in the caller's buffer.
            pub(super) struct Aead(pub(super) LessSafeKey);

            impl crate::backends::Aead for Aead {
                fn seal(&mut self, nonce: &[u8; 12], aad: &[u8], plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
                    out.clear();
                    out.extend_from_slice(plaintext);
                    self.0
                        .seal_in_place_append_tag(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), out)
                        .map_err(|_| {
                            out.clear();
                            BackendError::Failed("sealing failed (message too long?)".into())
                        })
                }

                fn open(&mut self, nonce: &[u8; 12], aad: &[u8], sealed: &[u8], out: &mut Vec<u8>) -> Result<()> {
                    out.clear();
                    split_tag(sealed)?;
                    out.extend_from_slice(sealed);
                    let opened = self
                        .0
                        .open_in_place(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), out.as_mut_slice())
                        .map(|plaintext| plaintext.len());
                    match opened {
                        Ok(n) => {
                            out.truncate(n);
                            Ok(())
                        }
                        Err(_) => {
                            // Never hand out unauthenticated plaintext.
                            out.clear();
                            Err(BackendError::Failed("authentication failed (tag mismatch)".into()))
                        }
                    }
                }
            }

            /// RSA signing with a parsed key pair; `rng` salts PSS and blinds.
            pub(super) struct RsaSigner {
                pub(super) key: RsaKeyPair,
                pub(super) encoding: &'static dyn RsaEncoding,
                pub(super) rng: SystemRandom,
                /// Bytes of a signature: the modulus length.
                pub(super) sig_len: usize,
            }

            impl crate::backends::Signer for RsaSigner {
                fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
                    let mut sig = vec![0; self.sig_len];
                    self.key
                        .sign(self.encoding, &self.rng, msg, &mut sig)
                        .map_err(|e| BackendError::Failed(format!("RSA signing failed: {e}")))?;
                    Ok(sig)
                }
            }

            /// ECDSA signing (DER `Ecdsa-Sig-Value`) with a parsed key pair and random nonces.
            pub(super) struct EcdsaSigner {
                pub(super) key: EcdsaKeyPair,
                pub(super) rng: SystemRandom,
            }

            impl crate::backends::Signer for EcdsaSigner {
                fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
                    let sig = self
                        .key
                        .sign(&self.rng, msg)
                        .map_err(|e| BackendError::Failed(format!("ECDSA signing failed: {e}")))?;
                    Ok(sig.as_ref().to_vec())
                }
            }

            /// Ed25519 signing with the key pair expanded once.
            pub(super) struct Ed25519Signer(pub(super) Ed25519KeyPair);

            impl crate::backends::Signer for Ed25519Signer {
                fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
                    Ok(self.0.sign(msg).as_ref().to_vec())
                }
            }
        }
    };
}

pub(crate) use ring_api;
