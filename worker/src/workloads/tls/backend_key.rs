//! A TLS server key that signs through one of the worker's backends instead of the TLS stack's
//! own provider: `tls-handshake` with `stack` naming a TLS implementation other than the cell
//! backend's own runs that stack, and every handshake signature of the server is made by the
//! cell's backend — `pkcs11`: the key on a token, as a server whose private key lives in an HSM;
//! `openssl`: the same path with the key in software, the baseline to compare it with.
//!
//! The key is the server identity's own (generated per run, [`Identity::generate`]), handed to
//! the backend as every signing operation gets its key ([`Backend::signer`]; the `pkcs11`
//! backend imports it into its session as a session object, gone when the session closes).
//! Signers are pooled: a thread that signs takes one (making it when the pool is empty) and puts
//! it back, so there are as many as threads sign at once — for a token, one session per serving
//! thread, as a device's throughput grows with concurrent sessions.
//!
//! Correct before timed: [`BackendKey::open`] runs the backend's known-answer test and
//! cross-backend checks of each signature scheme it will use ([`kat::validate`]) and signs once
//! with the identity's key, checked by OpenSSL; every handshake then has the client verify the
//! signature (the cross-checks of `tls-handshake` do so with every other implementation).
//! Only rustls takes a key like this (its `SigningKey`); OpenSSL's libssl signs only with keys
//! it holds itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use openssl::pkey::{PKey, Private};
use rustls::pki_types::SubjectPublicKeyInfoDer;
use rustls::sign::{Signer as TlsSigner, SigningKey};
use rustls::{SignatureAlgorithm, SignatureScheme};

use super::{CertKind, Identity};
use crate::backends::{self, Backend, BackendError, Signer};
use crate::kat;
use crate::ops::keys::KeyPair;
use crate::ops::{DigestAlg, Op, Params, RsaPadding, SigAlg, SigFamily};

/// The bytes a TLS 1.3 server signs (RFC 8446 §4.4.3: 64 spaces, the context string, a zero,
/// the transcript hash): the message size the checks sign.
const SIGNED_CONTENT_BYTES: usize = 64 + 33 + 1 + 32;

/// The identity's private key, in the parts [`KeyPair`] carries, owned.
struct KeyParts {
    pkcs8: Vec<u8>,
    raw: Vec<u8>,
    public: Vec<u8>,
    /// SubjectPublicKeyInfo DER, for rustls's key/certificate match.
    spki: Vec<u8>,
}

impl KeyParts {
    /// Split a PKCS#8 private key (of `kind`) with OpenSSL: the PKCS#1 public key for RSA; the
    /// raw scalar and uncompressed point for ECDSA; the raw keys for Ed25519.
    fn of(kind: CertKind, pkcs8: &[u8]) -> Result<(KeyParts, PKey<Private>), String> {
        let pkey = PKey::private_key_from_der(pkcs8).map_err(|e| format!("the server key: {e}"))?;
        let e = |e: openssl::error::ErrorStack| format!("the server key: {e}");
        let (raw, public) = match kind {
            CertKind::Rsa2048 | CertKind::Rsa4096 => (vec![], pkey.rsa().and_then(|r| r.public_key_to_der_pkcs1()).map_err(e)?),
            CertKind::EcdsaP256 => {
                let ec = pkey.ec_key().map_err(e)?;
                let mut ctx = openssl::bn::BigNumContext::new().map_err(e)?;
                let point = ec.public_key().to_bytes(ec.group(), openssl::ec::PointConversionForm::UNCOMPRESSED, &mut ctx).map_err(e)?;
                (ec.private_key().to_vec_padded(32).map_err(e)?, point)
            }
            CertKind::Ed25519 => (pkey.raw_private_key().map_err(e)?, pkey.raw_public_key().map_err(e)?),
        };
        let spki = pkey.public_key_to_der().map_err(e)?;
        Ok((KeyParts { pkcs8: pkcs8.to_vec(), raw, public, spki }, pkey))
    }

    fn pair(&self) -> KeyPair<'_> {
        KeyPair { private_pkcs8: &self.pkcs8, private_raw: &self.raw, public: &self.public }
    }
}

/// The TLS signature schemes a key of `kind` may sign with, in the order the server prefers
/// them, each with the backend operation that makes it: RSA-PSS with SHA-256 (the only RSA
/// schemes of TLS 1.3 are PSS, RFC 8446 §4.2.3) before PKCS#1 v1.5 with SHA-256 (TLS 1.2);
/// ECDSA P-256 with SHA-256; Ed25519.
fn schemes(kind: CertKind) -> Vec<(SignatureScheme, SigAlg)> {
    let rsa = |bits| {
        vec![
            (SignatureScheme::RSA_PSS_SHA256, SigAlg::Rsa { bits, digest: DigestAlg::Sha256, padding: RsaPadding::Pss }),
            (SignatureScheme::RSA_PKCS1_SHA256, SigAlg::Rsa { bits, digest: DigestAlg::Sha256, padding: RsaPadding::Pkcs1 }),
        ]
    };
    match kind {
        CertKind::Rsa2048 => rsa(2048),
        CertKind::Rsa4096 => rsa(4096),
        CertKind::EcdsaP256 => vec![(SignatureScheme::ECDSA_NISTP256_SHA256, SigAlg::EcdsaP256 { digest: DigestAlg::Sha256 })],
        CertKind::Ed25519 => vec![(SignatureScheme::ED25519, SigAlg::Ed25519)],
    }
}

/// The backend operation and parameters [`kat::validate`] checks for `alg`.
fn kat_op(alg: SigAlg) -> (Op, Params) {
    let (family, digest, padding) = match alg {
        SigAlg::Rsa { bits, digest, padding } => (SigFamily::Rsa(bits), Some(digest), Some(padding)),
        SigAlg::EcdsaP256 { digest } => (SigFamily::EcdsaP256, Some(digest), None),
        SigAlg::EcdsaP384 { digest } => (SigFamily::EcdsaP384, Some(digest), None),
        SigAlg::Ed25519 => (SigFamily::Ed25519, None, None),
        SigAlg::MlDsa(level) => (SigFamily::MlDsa(level), None, None),
    };
    (Op::Sign(family), Params { size_bytes: SIGNED_CONTENT_BYTES, digest, padding })
}

/// A server key whose signatures the backend `backend` makes (see the module documentation).
pub struct BackendKey {
    backend: Box<dyn Backend>,
    kind: CertKind,
    key: KeyParts,
    /// The schemes the backend signs with this key, preferred first.
    schemes: Vec<(SignatureScheme, SigAlg)>,
    /// Idle signers per scheme.
    pool: Mutex<HashMap<SigAlg, Vec<Box<dyn Signer>>>>,
    /// What the checks found, one line (the workload's validation reports it).
    pub checked: String,
}

impl std::fmt::Debug for BackendKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendKey").field("backend", &self.backend.info().backend).field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl BackendKey {
    /// The backend named `name` opened (a token logged in), holding `id`'s key, its signature
    /// schemes checked (see the module documentation).
    ///
    /// Errors: `Unsupported` when the backend signs with none of the key's TLS schemes (or is
    /// unknown); `Failed` when it cannot be opened, a check fails or its signature of the
    /// identity's key does not verify with OpenSSL.
    pub fn open(name: &str, id: &Identity) -> Result<BackendKey, BackendError> {
        let backend = backends::by_name(name).ok_or_else(|| BackendError::Unsupported(format!("no backend '{name}' in this worker")))?;
        backend.open()?;
        refuse_generated(&*backend, name)?;
        let (key, pkey) = KeyParts::of(id.kind, &id.key_pkcs8_der).map_err(BackendError::Failed)?;
        let mut usable = Vec::new();
        let mut checked = Vec::new();
        let mut pool = HashMap::new();
        let mut missing = Vec::new();
        for (scheme, alg) in schemes(id.kind) {
            let mut signer = match backend.signer(alg, &key.pair()) {
                Ok(s) => s,
                Err(BackendError::Unsupported(why)) => {
                    missing.push(why);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (op, params) = kat_op(alg);
            let v = kat::validate(&*backend, op, &params)?;
            if let Some(why) = v.failure() {
                return Err(BackendError::Failed(format!("{name} signing {scheme:?}: {why}")));
            }
            verify_with_openssl(&pkey, alg, &mut *signer).map_err(|why| BackendError::Failed(format!("{name} signing {scheme:?}: {why}")))?;
            checked.push(format!("{scheme:?}: known-answer test {}, {} cross-checks passed, the server key's signature verifies with OpenSSL",
                                 v.kat, v.cross_checks.iter().filter(|c| c.status == "pass").count()));
            pool.insert(alg, vec![signer]);
            usable.push((scheme, alg));
        }
        if usable.is_empty() {
            return Err(BackendError::Unsupported(format!("{name} signs none of the TLS schemes of a {} key: {}", id.kind.name(), missing.join("; "))));
        }
        Ok(BackendKey {
            backend,
            kind: id.kind,
            key,
            schemes: usable,
            pool: Mutex::new(pool),
            checked: format!("the server key on {name}: {}", checked.join("; ")),
        })
    }

    /// Whether the backend named `name` can sign with a key of `id`'s kind in TLS, checking
    /// nothing else (for a workload's `check`): `Err(reason)` when it cannot.
    pub fn supported(name: &str, id: &Identity) -> Result<(), String> {
        let backend = backends::by_name(name).ok_or_else(|| format!("no backend '{name}' in this worker"))?;
        backend.open().map_err(|e| e.to_string())?;
        refuse_generated(&*backend, name).map_err(|e| e.to_string())?;
        let (key, _) = KeyParts::of(id.kind, &id.key_pkcs8_der)?;
        let mut why = Vec::new();
        for (_, alg) in schemes(id.kind) {
            match backend.signer(alg, &key.pair()) {
                Ok(_) => return Ok(()),
                Err(BackendError::Unsupported(r)) => why.push(r),
                Err(BackendError::Failed(_)) => return Ok(()), // the run says what failed
            }
        }
        Err(format!("{name} signs none of the TLS schemes of a {} key: {}", id.kind.name(), why.join("; ")))
    }

    /// Sign `message` with `alg`, on an idle signer of the pool or a new one.
    fn sign(&self, alg: SigAlg, message: &[u8]) -> Result<Vec<u8>, BackendError> {
        let idle = self.pool.lock().unwrap().get_mut(&alg).and_then(Vec::pop);
        let mut signer = match idle {
            Some(s) => s,
            None => self.backend.signer(alg, &self.key.pair())?,
        };
        let signature = signer.sign(message);
        self.pool.lock().unwrap().entry(alg).or_default().push(signer);
        signature
    }
}

/// `Unsupported` for a backend that signs only with keys it generates: the server's
/// certificate is for the identity's key.
fn refuse_generated(backend: &dyn Backend, name: &str) -> Result<(), BackendError> {
    match backend.generates_signing_keys() {
        Some(why) => Err(BackendError::Unsupported(format!(
            "{name} signs only with keys it generates ({why}); a TLS server key on it needs a certificate for that key, which cryptoperf does not make yet"
        ))),
        None => Ok(()),
    }
}

/// Sign a test message with `signer` and verify it with OpenSSL under `pkey`'s public key.
fn verify_with_openssl(pkey: &PKey<Private>, alg: SigAlg, signer: &mut dyn Signer) -> Result<(), String> {
    use openssl::hash::MessageDigest;
    use openssl::rsa::Padding;
    let msg = [0x20u8; SIGNED_CONTENT_BYTES];
    let sig = signer.sign(&msg).map_err(|e| e.to_string())?;
    let e = |e: openssl::error::ErrorStack| e.to_string();
    let ok = match alg {
        SigAlg::Ed25519 => openssl::sign::Verifier::new_without_digest(pkey).and_then(|mut v| v.verify_oneshot(&sig, &msg)).map_err(e)?,
        _ => {
            let mut v = openssl::sign::Verifier::new(MessageDigest::sha256(), pkey).map_err(e)?;
            if let SigAlg::Rsa { padding: RsaPadding::Pss, .. } = alg {
                v.set_rsa_padding(Padding::PKCS1_PSS).map_err(e)?;
                v.set_rsa_pss_saltlen(openssl::sign::RsaPssSaltlen::DIGEST_LENGTH).map_err(e)?;
            }
            v.update(&msg).and_then(|_| v.verify(&sig)).map_err(e)?
        }
    };
    if ok { Ok(()) } else { Err("its signature with the server key does not verify with OpenSSL".into()) }
}

/// The rustls face of a [`BackendKey`].
#[derive(Debug)]
pub(super) struct RustlsKey(pub Arc<BackendKey>);

/// One chosen scheme of a [`RustlsKey`].
#[derive(Debug)]
struct RustlsSigner {
    key: Arc<BackendKey>,
    scheme: SignatureScheme,
    alg: SigAlg,
}

impl SigningKey for RustlsKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn TlsSigner>> {
        let &(scheme, alg) = self.0.schemes.iter().find(|(s, _)| offered.contains(s))?;
        Some(Box::new(RustlsSigner { key: self.0.clone(), scheme, alg }))
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        Some(SubjectPublicKeyInfoDer::from(self.0.key.spki.as_slice()))
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        match self.0.kind {
            CertKind::Rsa2048 | CertKind::Rsa4096 => SignatureAlgorithm::RSA,
            CertKind::EcdsaP256 => SignatureAlgorithm::ECDSA,
            CertKind::Ed25519 => SignatureAlgorithm::ED25519,
        }
    }
}

impl TlsSigner for RustlsSigner {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
        self.key.sign(self.alg, message).map_err(|e| rustls::Error::General(format!("{}: {e}", self.key.backend.info().backend)))
    }

    fn scheme(&self) -> SignatureScheme {
        self.scheme
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tls::{self, Stack, TlsParams};

    fn params(version: tls::TlsVersion, cert: CertKind) -> TlsParams {
        TlsParams { version, cert, group: tls::Group::P256, suite: tls::Suite::Aes128Gcm, resume: false, record_bytes: None, fallback_group: None }
    }

    fn with_key(kind: CertKind, backend: &str) -> Identity {
        let mut id = Identity::generate(kind).unwrap();
        id.signing = Some(Arc::new(BackendKey::open(backend, &id).unwrap()));
        id
    }

    #[test]
    fn a_handshake_verifies_the_signature_another_backend_made() {
        for kind in [CertKind::Rsa2048, CertKind::EcdsaP256] {
            for version in [tls::TlsVersion::Tls12, tls::TlsVersion::Tls13] {
                let id = with_key(kind, "openssl");
                let p = params(version, kind);
                let server = tls::server(Stack::RustlsAwsLc, &id, &p).unwrap();
                for client in Stack::ALL.iter().copied() {
                    let c = tls::client(client, &id, &p).unwrap();
                    let o = tls::transaction_in_memory(&*c, &*server).unwrap();
                    assert_eq!(o.negotiated.mismatch(&p), None, "{kind:?} {version:?} {client:?}");
                }
            }
        }
    }

    #[test]
    fn the_server_prefers_pss_and_falls_back_to_pkcs1_in_tls12() {
        let id = with_key(CertKind::Rsa2048, "openssl");
        let key = RustlsKey(id.signing.clone().unwrap());
        let pss = key.choose_scheme(&[SignatureScheme::RSA_PKCS1_SHA256, SignatureScheme::RSA_PSS_SHA256]).unwrap();
        assert_eq!(pss.scheme(), SignatureScheme::RSA_PSS_SHA256);
        let pkcs1 = key.choose_scheme(&[SignatureScheme::RSA_PKCS1_SHA256]).unwrap();
        assert_eq!(pkcs1.scheme(), SignatureScheme::RSA_PKCS1_SHA256);
        assert!(key.choose_scheme(&[SignatureScheme::ECDSA_NISTP256_SHA256]).is_none());
    }

    #[test]
    fn threads_signing_at_once_get_signers_of_their_own() {
        let id = with_key(CertKind::EcdsaP256, "openssl");
        let key = id.signing.clone().unwrap();
        let alg = schemes(CertKind::EcdsaP256)[0].1;
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20 {
                        key.sign(alg, b"message").unwrap();
                    }
                });
            }
        });
        let idle = key.pool.lock().unwrap()[&alg].len();
        assert!((1..=4).contains(&idle), "{idle} idle signers after 4 threads");
    }

    #[test]
    fn openssls_tls_refuses_a_key_on_another_backend() {
        let id = with_key(CertKind::EcdsaP256, "openssl");
        let p = params(tls::TlsVersion::Tls13, CertKind::EcdsaP256);
        match tls::server(Stack::OpenSsl, &id, &p) {
            Err(BackendError::Unsupported(why)) => assert!(why.contains("rustls"), "{why}"),
            other => panic!("expected unsupported, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn an_unknown_backend_is_unsupported() {
        let id = Identity::generate(CertKind::EcdsaP256).unwrap();
        match BackendKey::open("no-such-backend", &id) {
            Err(BackendError::Unsupported(why)) => assert!(why.contains("no-such-backend"), "{why}"),
            other => panic!("expected unsupported, got {:?}", other.map(|_| ())),
        }
    }
}
