//! What a job moves and signs: deterministic files and items, the HMAC keys, the pool keys of
//! the identities, and the primitives a job uses.

use crate::workloads::tls::{self, CertKind};
use crate::backends::{self, Backend, BackendError};
use crate::ops::keys::KeyPair;
use super::spec::*;

/// `len` deterministic bytes for `seed` (SplitMix64): the content of files and items, the same
/// on both sides without being sent.
pub(super) fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5ca1_ab1e;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The check file `j` (`file_bytes` each); a tampered target's file 0 has its first byte flipped.
pub(super) fn file(j: usize, len: usize) -> Vec<u8> {
    fill(0xf11e_0000 + j as u64, len)
}

/// Pushed item `j` (`item_bytes` each).
pub(super) fn item(j: usize, len: usize) -> Vec<u8> {
    fill(0x17e4_0000 + j as u64, len)
}

/// The HMAC key the management server and target `i` share (32 bytes; the probe's index,
/// `usize::MAX`, wraps the seed instead of overflowing it).
pub(super) fn hmac_key(i: usize) -> Vec<u8> {
    fill(0x4d41_4300_0000u64.wrapping_add(i as u64), 32)
}

/// A key of the pool in the encodings the backends import ([`KeyPair`]).
pub(super) struct KeyMaterial {
    pub(super) pkcs8: Vec<u8>,
    pub(super) raw: Vec<u8>,
    pub(super) public: Vec<u8>,
}

impl KeyMaterial {
    pub(super) fn pair(&self) -> KeyPair<'_> {
        KeyPair { private_pkcs8: &self.pkcs8, private_raw: &self.raw, public: &self.public }
    }
}

/// Pool key `index` of `kind` as [`KeyMaterial`].
pub(super) fn key_material(kind: CertKind, index: usize) -> Result<KeyMaterial, String> {
    let pkcs8 = tls::pool_key(kind, index).to_vec();
    let key = openssl::pkey::PKey::private_key_from_pkcs8(&pkcs8).map_err(|e| format!("pool key: {e}"))?;
    let public = public_encoding(&key)?;
    let raw = match kind {
        CertKind::EcdsaP256 => {
            key.ec_key().and_then(|k| k.private_key().to_vec_padded(32)).map_err(|e| format!("pool key: {e}"))?
        }
        CertKind::Ed25519 => key.raw_private_key().map_err(|e| format!("pool key: {e}"))?,
        _ => vec![],
    };
    Ok(KeyMaterial { pkcs8, raw, public })
}

/// The public key of `key` in the backends' encoding: PKCS #1 DER (RSA), the uncompressed
/// point (EC), the 32 raw bytes (Ed25519).
pub(super) fn public_encoding<T: openssl::pkey::HasPublic>(key: &openssl::pkey::PKeyRef<T>) -> Result<Vec<u8>, String> {
    use openssl::pkey::Id;
    let e = |e: openssl::error::ErrorStack| format!("public key: {e}");
    match key.id() {
        Id::RSA => key.rsa().and_then(|r| r.public_key_to_der_pkcs1()).map_err(e),
        Id::EC => {
            let ec = key.ec_key().map_err(e)?;
            let mut ctx = openssl::bn::BigNumContext::new().map_err(e)?;
            ec.public_key().to_bytes(ec.group(), openssl::ec::PointConversionForm::UNCOMPRESSED, &mut ctx).map_err(e)
        }
        Id::ED25519 => key.raw_public_key().map_err(e),
        other => Err(format!("public key of an unexpected type {other:?}")),
    }
}

/// The public key (backends' encoding) of the certificate `der`.
pub(super) fn public_of_cert(der: &[u8]) -> Result<Vec<u8>, String> {
    let cert = openssl::x509::X509::from_der(der).map_err(|e| format!("the peer certificate does not parse: {e}"))?;
    let key = cert.public_key().map_err(|e| format!("the peer certificate's key: {e}"))?;
    public_encoding(&key)
}

/// The backend called `name` (a real one: `parse` found its TLS stack).
pub(super) fn backend_of(name: &str) -> Result<Box<dyn Backend>, BackendError> {
    backends::by_name(name).ok_or_else(|| BackendError::Failed(format!("unknown backend {name}")))
}

/// Whether `backend` can make everything `spec`'s phases need (digests, HMACs, signatures of
/// the key kind with `sign_digest`, their verification); `Err(Unsupported)` names what not.
pub(super) fn check_primitives(backend: &dyn Backend, spec: &Spec) -> Result<(), BackendError> {
    let mine = key_material(spec.p.cert, MANAGEMENT_KEY).map_err(BackendError::Failed)?;
    if spec.phases.contains(&Phase::Checks) {
        backend.digest(spec.digest)?;
    }
    if spec.phases.contains(&Phase::Push) && spec.auth == Auth::Hmac {
        backend.hmac(spec.digest, &hmac_key(0))?;
    }
    if spec.phases.contains(&Phase::Report) || spec.stages() {
        backend.signer(spec.sig_alg(), &mine.pair())?;
        backend.verifier(spec.sig_alg(), &mine.public)?;
    }
    Ok(())
}
