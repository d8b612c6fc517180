//! Crypto libraries behind one [`Backend`] trait, one file each, chosen in one `match`
//! ([`by_name`]).
//!
//! A backend hands out *prepared* primitives (keys parsed, contexts allocated) so the timed loop
//! calls only the operation itself. The same primitives serve the known-answer tests and the
//! cross-backend checks (`crate::kat`), so what is checked is exactly what is timed.
//! A backend that lacks an algorithm returns [`BackendError::Unsupported`] with the reason;
//! that is reported as "unsupported", never as a crash.

pub mod awslc;
pub mod mock;
pub mod openssl;
pub mod ring;
pub mod rustcrypto;

use crate::cpu::Capabilities;
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KemAlg, KxAlg, SigAlg};

/// Why a backend could not hand out a primitive.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The library does not implement this algorithm/parameter combination. The string says
    /// what is missing, e.g. "ring has no SHA3-256".
    #[error("{0}")]
    Unsupported(String),
    /// The library was asked and failed (bad key, internal error, authentication failure).
    #[error("{0}")]
    Failed(String),
}

pub type Result<T> = std::result::Result<T, BackendError>;

/// Shorthand for `Err(BackendError::Unsupported(..))`.
pub fn unsupported<T>(what: impl Into<String>) -> Result<T> {
    Err(BackendError::Unsupported(what.into()))
}

/// Turn any library error into [`BackendError::Failed`], keeping its text.
pub fn failed(e: impl std::fmt::Display) -> BackendError {
    BackendError::Failed(e.to_string())
}

/// A hash function, ready to run.
pub trait Digest {
    /// Hash `data` in one shot; `out` is cleared and receives the digest.
    fn digest(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()>;
}

/// A MAC with its key already set.
pub trait Mac {
    /// MAC `data` in one shot; `out` is cleared and receives the tag.
    fn mac(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()>;
}

/// An AEAD with its key already expanded. Nonces are 12 bytes, tags 16 bytes.
pub trait Aead {
    /// Encrypt `plaintext`; `out` is cleared and receives `ciphertext || tag`.
    fn seal(&mut self, nonce: &[u8; 12], aad: &[u8], plaintext: &[u8], out: &mut Vec<u8>)
        -> Result<()>;
    /// Decrypt `ciphertext || tag`; `out` is cleared and receives the plaintext.
    /// An authentication failure is `Err(Failed)`.
    fn open(&mut self, nonce: &[u8; 12], aad: &[u8], sealed: &[u8], out: &mut Vec<u8>)
        -> Result<()>;
}

/// A private signing key, parsed.
pub trait Signer {
    /// Sign `msg` (hashing it with the scheme's digest); returns the signature
    /// (RSA: modulus-length bytes; ECDSA: DER `Ecdsa-Sig-Value`; Ed25519: 64 bytes).
    fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>>;
}

/// A public verification key, parsed.
pub trait Verifier {
    /// `Ok(true)` when `sig` is a valid signature of `msg`, `Ok(false)` when it is not.
    fn verify(&mut self, msg: &[u8], sig: &[u8]) -> Result<bool>;
}

/// Our private key of a key agreement, parsed and reusable.
pub trait Agreement {
    /// Our public key, in the encoding of [`KeyPair::public`] (for FFDH: big-endian, the
    /// prime's length).
    fn public_key(&self) -> Vec<u8>;
    /// Derive the shared secret with the peer's public key (same encoding).
    fn derive(&mut self, peer_public: &[u8]) -> Result<Vec<u8>>;
}

/// The decapsulating side of a KEM: a key pair generated (outside the timed loop) by the backend.
pub trait KemDecapsulator {
    /// The encapsulation (public) key, in FIPS 203 byte encoding.
    fn encapsulation_key(&self) -> Vec<u8>;
    /// Recover the 32-byte shared secret from a ciphertext.
    fn decaps(&mut self, ciphertext: &[u8]) -> Result<Vec<u8>>;
}

/// The encapsulating side of a KEM, holding the peer's parsed encapsulation key.
pub trait KemEncapsulator {
    /// Returns `(ciphertext, shared_secret)`.
    fn encaps(&mut self) -> Result<(Vec<u8>, Vec<u8>)>;
}

/// The library a backend wraps, as reported in `hello` and stored with every result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LibraryInfo {
    /// Backend name used in requests: `openssl`, `aws-lc`, `ring`, `rustcrypto`.
    pub backend: &'static str,
    /// Human name of the library, e.g. "OpenSSL", "AWS-LC".
    pub library: String,
    /// Version as the library reports it at run time where it can (OpenSSL), else the crate
    /// version it was built from.
    pub library_version: String,
    /// Whether the library runs in a FIPS-validated mode.
    pub fips: bool,
}

/// One crypto library. Every method returns a prepared primitive or says why it cannot; the
/// default bodies say "unsupported", so a backend implements only what its library has.
///
/// Keys arrive in the encodings documented on [`KeyPair`]; a backend that cannot import an
/// encoding converts it or returns `Unsupported` with the reason.
pub trait Backend: Send + Sync {
    fn info(&self) -> LibraryInfo;

    /// The CPU capability vector the library chose its code paths from, read in this process
    /// (after the library initialised, so after it applied `OPENSSL_ia32cap`), or why there is
    /// none. The default is for libraries with no runtime mask (ring, RustCrypto): a cell that
    /// asks them for a mask is reported "unsupported", never run unmasked.
    fn capabilities(&self) -> Capabilities {
        Capabilities::NotMaskable(format!("{} has no runtime CPU capability mask", self.info().library))
    }

    fn digest(&self, alg: DigestAlg) -> Result<Box<dyn Digest>> {
        unsupported(format!("{} has no {}", self.info().library, alg.name()))
    }
    fn hmac(&self, alg: DigestAlg, _key: &[u8]) -> Result<Box<dyn Mac>> {
        unsupported(format!("{} has no HMAC-{}", self.info().library, alg.name()))
    }
    fn aead(&self, alg: AeadAlg, _key: &[u8]) -> Result<Box<dyn Aead>> {
        unsupported(format!("{} has no {}", self.info().library, alg.name()))
    }
    fn signer(&self, alg: SigAlg, _key: &KeyPair) -> Result<Box<dyn Signer>> {
        unsupported(format!("{} cannot sign with {alg:?}", self.info().library))
    }
    /// `public` is in the encoding of [`KeyPair::public`].
    fn verifier(&self, alg: SigAlg, _public: &[u8]) -> Result<Box<dyn Verifier>> {
        unsupported(format!("{} cannot verify {alg:?}", self.info().library))
    }
    /// `ours` is `None` for FFDH, where the backend generates the key pair.
    fn agreement(&self, alg: KxAlg, _ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        unsupported(format!("{} has no reusable {alg:?} key agreement", self.info().library))
    }
    fn kem_keypair(&self, alg: KemAlg) -> Result<Box<dyn KemDecapsulator>> {
        unsupported(format!("{} has no {alg:?}", self.info().library))
    }
    fn kem_encapsulator(
        &self,
        alg: KemAlg,
        _encapsulation_key: &[u8],
    ) -> Result<Box<dyn KemEncapsulator>> {
        unsupported(format!("{} has no {alg:?}", self.info().library))
    }
}

/// Names of the real crypto backends, in the order `hello` lists them.
pub const NAMES: &[&str] = &["openssl", "aws-lc", "ring", "rustcrypto"];

/// The backend called `name`, or `None` (the caller lists [`NAMES`]). `mock`, `mock:SCALE`,
/// `mock:crash` and `mock:hang` are the scripted backend for tests; they are not in [`NAMES`].
pub fn by_name(name: &str) -> Option<Box<dyn Backend>> {
    match name {
        "openssl" => Some(Box::new(openssl::OpenSsl)),
        "aws-lc" => Some(Box::new(awslc::AwsLc)),
        "ring" => Some(Box::new(ring::Ring)),
        "rustcrypto" => Some(Box::new(rustcrypto::RustCrypto)),
        _ => mock::Mock::from_name(name).map(|m| Box::new(m) as Box<dyn Backend>),
    }
}
