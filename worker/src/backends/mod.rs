//! Crypto libraries behind one [`Backend`] trait, one file each, chosen in one `match`
//! ([`by_name`]).
//!
//! A backend hands out *prepared* primitives (keys parsed, contexts allocated) so the timed loop
//! calls only the operation itself. The same primitives serve the known-answer tests and the
//! cross-backend checks (`crate::kat`), so what is checked is exactly what is timed.
//! A backend that lacks an algorithm returns [`BackendError::Unsupported`] with the reason;
//! that is reported as "unsupported", never as a crash.

pub mod awslc;
#[cfg(test)]
pub(crate) mod conformance;
pub mod hybrid;
pub mod mock;
pub mod openssl;
pub mod pkcs11;
pub mod ring;
mod ring_api;
pub mod rustcrypto;
#[cfg(test)]
mod xts_bench;

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

/// XTS-AES key sizes are an operation parameter (`crate::ops`); re-exported here for the
/// workloads that ask a backend for a sector cipher.
pub use crate::ops::XtsBits;

/// Refuse an AEAD key of the wrong length for `alg` ([`AeadAlg::key_len`]), with the same words
/// in every backend (the libraries' own refusals differ, or are a bare "unspecified").
pub fn check_aead_key(alg: AeadAlg, key: &[u8]) -> Result<()> {
    if key.len() == alg.key_len() {
        return Ok(());
    }
    Err(BackendError::Failed(format!("{} takes a {}-byte key, got {} bytes", alg.name(), alg.key_len(), key.len())))
}

/// Refuse a key, seed or share of the wrong length, with the same words in every backend:
/// "`what` must be `len` bytes, got N". Errors: `Failed`.
#[inline]
pub fn check_len(what: &str, bytes: &[u8], len: usize) -> Result<()> {
    if bytes.len() == len {
        return Ok(());
    }
    Err(wrong_len(what, len, bytes.len()))
}

/// `bytes` as an array of `N` bytes (a fixed-size key or seed). Errors: `Failed`, in the words
/// of [`check_len`], for another length.
#[inline]
pub fn to_array<const N: usize>(what: &str, bytes: &[u8]) -> Result<[u8; N]> {
    bytes.try_into().map_err(|_| wrong_len(what, N, bytes.len()))
}

fn wrong_len(what: &str, len: usize, got: usize) -> BackendError {
    BackendError::Failed(format!("{what} must be {len} bytes, got {got}"))
}

/// Split an AEAD's sealed message into `(ciphertext, tag)`, the tag being its last
/// [`AeadAlg::TAG_LEN`] bytes, with the same words in every backend. Errors: `Failed` for a
/// message shorter than the tag.
#[inline]
pub fn split_tag(sealed: &[u8]) -> Result<(&[u8], &[u8])> {
    match sealed.len().checked_sub(AeadAlg::TAG_LEN) {
        Some(n) => Ok(sealed.split_at(n)),
        None => Err(BackendError::Failed("sealed message is shorter than the tag".into())),
    }
}

/// Refuse an RSA key whose size is not the one the operation names (a wrong key would time the
/// wrong thing without any error).
pub fn check_rsa_bits(have: usize, want: u32) -> Result<()> {
    if have == want as usize {
        return Ok(());
    }
    Err(BackendError::Failed(format!("RSA key has {have} bits, expected {want}")))
}

/// The XTS tweak of a data unit: its sequence number (here the sector number) as a 16-byte
/// little-endian value (IEEE Std 1619-2007 §5.1; dm-crypt's `plain64` IV).
pub fn xts_tweak(sector: u64) -> [u8; 16] {
    (sector as u128).to_le_bytes()
}

/// Refuse an XTS key of the wrong length, or whose two halves are equal (FIPS 140-2 IG A.9:
/// "Key_1 ≠ Key_2", checked before the keys process data; OpenSSL and AWS-LC refuse such a key
/// themselves, RustCrypto's xts-mode does not). The same check in every backend, so they agree
/// on what they refuse.
pub fn check_xts_key(bits: XtsBits, key: &[u8]) -> Result<()> {
    if key.len() != bits.key_len() {
        return Err(BackendError::Failed(format!(
            "{} takes a {}-byte key (two AES keys), got {} bytes",
            bits.name(),
            bits.key_len(),
            key.len()
        )));
    }
    let (k1, k2) = key.split_at(key.len() / 2);
    if k1 == k2 {
        return Err(BackendError::Failed(format!("{}: the two halves of the key are equal", bits.name())));
    }
    Ok(())
}

/// Refuse a data unit XTS cannot take without ciphertext stealing: not a whole number of
/// 16-byte blocks, or empty. (Sectors are 4096 bytes; the known-answer vectors 32 and 512.)
pub fn check_xts_unit(buf: &[u8]) -> Result<()> {
    if buf.is_empty() || buf.len() % 16 != 0 {
        return Err(BackendError::Failed(format!(
            "an XTS data unit here is a whole number of 16-byte blocks, got {} bytes",
            buf.len()
        )));
    }
    Ok(())
}

/// XTS-AES with its key set, encrypting one data unit (a sector) at a time, in place. The
/// tweak is the sector number as a 16-byte little-endian value ([`xts_tweak`]), as dm-crypt's
/// `aes-xts-plain64` (the LUKS2 default) computes it.
pub trait SectorCipher {
    /// Encrypt `buf` (one data unit: a whole number of 16-byte blocks, at least one) in place.
    /// Errors: `Failed` for another length or a library failure.
    fn encrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> Result<()>;
    /// Decrypt `buf` in place (XTS has no authentication: a wrong key or tweak gives garbage,
    /// not an error). Errors: as [`SectorCipher::encrypt_sector`].
    fn decrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> Result<()>;
}

/// A private signing key, parsed. `Send`, so a pool of them can serve several threads (a TLS
/// server's key on another backend: `workloads::tls::backend_key`).
pub trait Signer: Send {
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
    /// Derive the shared secret with the peer's public key (same encoding). An implementation
    /// may keep the peer's parsed and validated key between calls while the peer's bytes stay
    /// the same (what `-derive` times: the derive alone, as `openssl speed` does).
    fn derive(&mut self, peer_public: &[u8]) -> Result<Vec<u8>>;
    /// Derive as a fresh exchange does (`-derive-validated`): parse the peer's public key from
    /// its bytes and validate it as the library's own key exchange does, on every call, keeping
    /// nothing from an earlier one. The validation is the library's: for FFDH, NIST SP 800-56A
    /// Rev. 3 §5.6.2.3.1's full check (2 ≤ y ≤ p − 2 and y^q = 1 mod p) in OpenSSL 3.0's
    /// `EVP_PKEY_derive_set_peer`, the range check alone (2 ≤ y ≤ p − 2) in AWS-LC's
    /// `DH_compute_key` for a group without q and in OpenSSL from 3.4 on for the named
    /// safe-prime groups; for P-256, that the point is on the curve (OpenSSL also multiplies it
    /// by the group order). The known-answer test finds out which and says so. Errors: `Failed`
    /// for a peer key the validation refuses. The default calls [`Agreement::derive`], which is
    /// right only for an implementation that keeps nothing between calls: one that does must
    /// override it.
    fn derive_validated(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        self.derive(peer_public)
    }
    /// Bits of our private exponent (FFDH key pairs: at most
    /// [`crate::ops::FFDH2048_PRIVATE_BITS`]), for the check that every backend draws the same
    /// length; `None` where the length is fixed by the algorithm (X25519, ECDH).
    fn private_bits(&self) -> Option<u32> {
        None
    }
}

/// The peer public key an [`Agreement`] last derived with, as its library parsed (and checked)
/// it: [`PeerCache::get_or_parse`] parses again only when the peer's bytes change, so repeated
/// derivations with one peer time the derive alone (`-derive`, as `openssl speed` does), and
/// [`PeerCache::forget`] makes the next call parse and check again (`-derive-validated`). `T`
/// gives the bytes it was parsed from ([`AsRef<[u8]>`]): a library's parsed key that keeps them,
/// or a [`PeerKey`] for one that does not.
pub(crate) struct PeerCache<T>(Option<T>);

impl<T: AsRef<[u8]>> PeerCache<T> {
    /// A cache holding no key yet.
    pub(crate) fn new() -> Self {
        PeerCache(None)
    }

    /// The parsed key of `peer_public`: the cached one when its bytes are the same (one slice
    /// comparison), else `parse(peer_public)`'s, kept for the next call. Errors: `parse`'s,
    /// leaving the cache empty.
    #[inline]
    pub(crate) fn get_or_parse(&mut self, peer_public: &[u8], parse: impl FnOnce(&[u8]) -> Result<T>) -> Result<&mut T> {
        if self.0.as_ref().is_none_or(|cached| cached.as_ref() != peer_public) {
            self.0 = None;
            self.0 = Some(parse(peer_public)?);
        }
        Ok(self.0.as_mut().expect("set just above"))
    }

    /// Drop the cached key: the next [`PeerCache::get_or_parse`] parses again.
    pub(crate) fn forget(&mut self) {
        self.0 = None;
    }
}

/// A parsed peer key beside a copy of the bytes it was parsed from, for a [`PeerCache`] of a
/// library whose parsed key does not keep them.
pub(crate) struct PeerKey<K> {
    bytes: Vec<u8>,
    pub(crate) key: K,
}

impl<K> PeerKey<K> {
    /// `key`, parsed from `bytes` (copied).
    pub(crate) fn new(bytes: &[u8], key: K) -> Self {
        PeerKey { bytes: bytes.to_vec(), key }
    }
}

impl<K> AsRef<[u8]> for PeerKey<K> {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// A fresh key pair for one key exchange (an ephemeral key share, as a TLS client or server or
/// an IKE peer makes per exchange), its public key already encoded, used once.
pub trait KeyShare {
    /// Our public key, in the encoding of [`KeyPair::public`] (what is sent to the peer).
    fn public_key(&self) -> &[u8];
    /// Derive the shared secret with the peer's public key, consuming the key pair. Errors:
    /// `Failed` for a peer key the library refuses.
    fn derive(self: Box<Self>, peer_public: &[u8]) -> Result<Vec<u8>>;
}

/// A [`KeyShare`] made from a reusable [`Agreement`] (the default of [`Backend::key_share`]).
struct AgreementShare {
    agreement: Box<dyn Agreement>,
    public: Vec<u8>,
}

impl KeyShare for AgreementShare {
    fn public_key(&self) -> &[u8] {
        &self.public
    }
    fn derive(mut self: Box<Self>, peer_public: &[u8]) -> Result<Vec<u8>> {
        self.agreement.derive_validated(peer_public)
    }
}

/// The decapsulating side of a KEM: a key pair generated by the backend (outside the timed
/// loop, except in `-keygen` operations), or imported.
pub trait KemDecapsulator {
    /// The encapsulation (public) key, in FIPS 203 byte encoding (hybrid: the client's share).
    fn encapsulation_key(&self) -> Vec<u8>;
    /// Recover the shared secret from a ciphertext (32 bytes; hybrid: 64).
    fn decaps(&mut self, ciphertext: &[u8]) -> Result<Vec<u8>>;
    /// The decapsulation key in FIPS 203 encoding, for the key-generation known-answer test.
    fn decapsulation_key(&self) -> Result<Vec<u8>> {
        unsupported("this decapsulation key cannot be exported")
    }
}

/// The encapsulating side of a KEM, holding the peer's parsed encapsulation key.
pub trait KemEncapsulator {
    /// Returns `(ciphertext, shared_secret)`.
    fn encaps(&mut self) -> Result<(Vec<u8>, Vec<u8>)>;
    /// Encapsulate with the given randomness m (FIPS 203 ML-KEM.Encaps_internal), for the
    /// known-answer test; `Unsupported` where the library takes no m.
    fn encaps_with(&mut self, _m: &[u8; 32]) -> Result<(Vec<u8>, Vec<u8>)> {
        unsupported("the library has no deterministic encapsulation (it takes no m)")
    }
}

/// A signing key pair the backend generated (`Backend::sig_keygen`).
pub struct GeneratedSigner {
    pub signer: Box<dyn Signer>,
    /// The public key, in the encoding of [`KeyPair::public`].
    pub public: Vec<u8>,
}

/// A signer of `alg` on `backend` and the public key (encoded as [`KeyPair::public`]) its
/// signatures verify with: the fixed `key`'s, or — for a backend that generates its own keys
/// ([`Backend::generates_signing_keys`]) — a key pair it generated now.
pub fn signing_pair(backend: &dyn Backend, alg: SigAlg, key: &KeyPair) -> Result<(Box<dyn Signer>, Vec<u8>)> {
    if backend.generates_signing_keys().is_some() {
        let generated = backend.sig_keygen(alg, None)?;
        return Ok((generated.signer, generated.public));
    }
    Ok((backend.signer(alg, key)?, key.public.to_vec()))
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
    /// The FIPS provider it runs under, as the provider reports itself (`fips::provider`:
    /// "OpenSSL FIPS Provider 3.1.2"); absent outside FIPS mode and for libraries that are
    /// their own FIPS module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fips_provider: Option<String>,
}

/// One crypto library. Every method returns a prepared primitive or says why it cannot; the
/// default bodies say "unsupported", so a backend implements only what its library has.
///
/// Keys arrive in the encodings documented on [`KeyPair`]; a backend that cannot import an
/// encoding converts it or returns `Unsupported` with the reason.
pub trait Backend: Send + Sync {
    fn info(&self) -> LibraryInfo;

    /// Reach the device behind the backend (load a PKCS#11 module, find its token, log in),
    /// once per process, before a request is checked or run. Libraries have nothing to open.
    /// Errors: `Failed`, in one line, when the device cannot be used (the request is then
    /// refused as `device_unavailable`).
    fn open(&self) -> Result<()> {
        Ok(())
    }

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
    /// XTS-AES with `key` (Key1 ‖ Key2, [`XtsBits::key_len`] bytes) for sector encryption
    /// (the `storage` workload). Errors: `Unsupported` where the library lacks the key size;
    /// `Failed` for a key of the wrong length or with equal halves ([`check_xts_key`]).
    fn xts(&self, bits: XtsBits, _key: &[u8]) -> Result<Box<dyn SectorCipher>> {
        unsupported(format!("{} has no {}", self.info().library, bits.name()))
    }
    fn signer(&self, alg: SigAlg, _key: &KeyPair) -> Result<Box<dyn Signer>> {
        unsupported(format!("{} cannot sign with {alg:?}", self.info().library))
    }
    /// `public` is in the encoding of [`KeyPair::public`].
    fn verifier(&self, alg: SigAlg, _public: &[u8]) -> Result<Box<dyn Verifier>> {
        unsupported(format!("{} cannot verify {alg:?}", self.info().library))
    }
    /// `ours` = `Some`: import that key pair (X25519, ECDH P-256). `ours` = `None`: the backend
    /// generates a fresh key pair from its random generator: always for FFDH-2048 (a key
    /// passed in is not used), and for ephemeral X25519 and P-256 shares (`x25519-keygen`, the
    /// hybrid's shares, the `ike-phase1` workload). Errors: `Unsupported` where the library
    /// lacks the agreement (or a reusable key pair for it), `Failed` on a bad key.
    fn agreement(&self, alg: KxAlg, _ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        unsupported(format!("{} has no reusable {alg:?} key agreement", self.info().library))
    }
    /// A fresh key pair for one exchange, its public key encoded: what `x25519-keygen`,
    /// `ecdh-p256-keygen` and `ffdh-2048-keygen` time. The default generates a reusable key pair
    /// (`agreement(alg, None)`) and encodes its public key; a library with only single-use key
    /// pairs (ring) overrides it. Errors: as [`Backend::agreement`].
    fn key_share(&self, alg: KxAlg) -> Result<Box<dyn KeyShare>> {
        let agreement = self.agreement(alg, None)?;
        let public = agreement.public_key();
        Ok(Box::new(AgreementShare { agreement, public }))
    }
    fn kem_keypair(&self, alg: KemAlg) -> Result<Box<dyn KemDecapsulator>> {
        unsupported(format!("{} has no {}", self.info().library, alg.display()))
    }
    fn kem_encapsulator(
        &self,
        alg: KemAlg,
        _encapsulation_key: &[u8],
    ) -> Result<Box<dyn KemEncapsulator>> {
        unsupported(format!("{} has no {}", self.info().library, alg.display()))
    }
    /// ML-KEM.KeyGen_internal(d, z) (FIPS 203 Algorithm 16): deterministic key generation, for
    /// the known-answer test.
    fn kem_keypair_from_seed(
        &self,
        alg: KemAlg,
        _d: &[u8; 32],
        _z: &[u8; 32],
    ) -> Result<Box<dyn KemDecapsulator>> {
        unsupported(format!("{} has no seeded {} key generation", self.info().library, alg.display()))
    }
    /// Import an ML-KEM decapsulation key (FIPS 203 encoding; the encapsulation key is the
    /// part of it FIPS 203 places there).
    fn kem_decapsulator(&self, alg: KemAlg, _dk: &[u8]) -> Result<Box<dyn KemDecapsulator>> {
        unsupported(format!("{} has no {}", self.info().library, alg.display()))
    }
    /// Generate a signing key pair: from the library's random generator (`seed` = `None`, what
    /// `-keygen` times), or from a seed (ML-DSA.KeyGen_internal(ξ), for the known-answer test).
    fn sig_keygen(&self, alg: SigAlg, _seed: Option<&[u8]>) -> Result<GeneratedSigner> {
        match alg {
            SigAlg::MlDsa(level) => unsupported(format!("{} has no {}", self.info().library, level.name())),
            _ => unsupported(format!("cryptoperf has no key generation for {alg:?}")),
        }
    }
    /// This backend as an owned value, for timed closures that must call the backend itself
    /// (`-keygen`). The real backends are unit values, found again by name.
    /// Why this backend signs only with keys it generates itself (a token that refuses imported
    /// private keys, as production HSMs do): `Some(reason)`, and every signing operation then
    /// signs with a key pair from [`Backend::sig_keygen`] ([`signing_pair`]); `None` (the
    /// default): it signs with the fixed keys it is given, as the known-answer tests need.
    fn generates_signing_keys(&self) -> Option<String> {
        None
    }

    /// A process outside the worker that does this backend's work (a PKCS#11 token whose
    /// module talks to a daemon), whose CPU a measurement reads over its window beside the
    /// worker's own; `None` (the default): the work is all in the worker.
    fn companion(&self) -> Option<crate::measure::proctree::TreeSource> {
        None
    }

    fn owned(&self) -> Option<Box<dyn Backend>> {
        by_name(self.info().backend)
    }
}

/// Names of the real crypto libraries, in the order `hello` lists them: each is checked against
/// the others ([`crate::kat`]).
pub const NAMES: &[&str] = &["openssl", "aws-lc", "ring", "rustcrypto"];

/// Names of the backends that reach a device (a PKCS#11 token), listed in `hello` after
/// [`NAMES`]: known-answer tested and checked against the libraries of [`NAMES`], but never a
/// library the others are checked against (a token is not always there).
pub const DEVICES: &[&str] = &["pkcs11"];

/// Every backend `hello` lists: [`NAMES`], then [`DEVICES`].
pub fn all_names() -> impl Iterator<Item = &'static str> {
    NAMES.iter().chain(DEVICES).copied()
}

/// The backend called `name`, or `None` (the caller lists [`NAMES`]). `mock`, `mock:SCALE`,
/// `mock:crash` and `mock:hang` are the scripted backend for tests; they are not in [`NAMES`].
pub fn by_name(name: &str) -> Option<Box<dyn Backend>> {
    match name {
        "openssl" => Some(Box::new(openssl::OpenSsl)),
        "aws-lc" => Some(Box::new(awslc::AwsLc)),
        "ring" => Some(Box::new(ring::Ring)),
        "rustcrypto" => Some(Box::new(rustcrypto::RustCrypto)),
        "pkcs11" => Some(Box::new(pkcs11::Pkcs11Token)),
        _ => mock::Mock::from_name(name).map(|m| Box::new(m) as Box<dyn Backend>),
    }
}

/// Panic unless `Cargo.lock` locks each `name version` of `crate_versions` (", "-separated, as a
/// backend's `LibraryInfo` names them): what keeps those names in step with the lock file.
#[cfg(test)]
pub(crate) fn assert_locked(crate_versions: &str) {
    let lock = include_str!("../../Cargo.lock");
    for entry in crate_versions.split(", ") {
        let (name, version) = entry.split_once(' ').unwrap();
        let needle = format!("name = \"{name}\"\nversion = \"{version}\"\n");
        assert!(lock.contains(&needle), "Cargo.lock does not lock {name} {version}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache parses once per peer, again after a new peer or `forget`, and keeps nothing
    /// from a parse that failed.
    #[test]
    fn peer_cache_parses_only_when_the_peer_changes() {
        let mut cache = PeerCache::new();
        let parses = std::cell::Cell::new(0);
        let get = |cache: &mut PeerCache<PeerKey<usize>>, peer: &[u8]| {
            cache
                .get_or_parse(peer, |bytes| {
                    parses.set(parses.get() + 1);
                    match bytes {
                        b"bad" => Err(BackendError::Failed("refused".into())),
                        _ => Ok(PeerKey::new(bytes, bytes.len())),
                    }
                })
                .map(|k| k.key)
        };
        assert_eq!(get(&mut cache, b"ab").unwrap(), 2);
        assert_eq!(get(&mut cache, b"ab").unwrap(), 2);
        assert_eq!(get(&mut cache, b"abc").unwrap(), 3);
        cache.forget();
        assert_eq!(get(&mut cache, b"abc").unwrap(), 3);
        assert!(get(&mut cache, b"bad").is_err());
        assert_eq!(get(&mut cache, b"abc").unwrap(), 3);
        assert_eq!(parses.get(), 5);
    }
}
