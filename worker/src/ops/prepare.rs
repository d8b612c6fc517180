//! Building the timed closure of a case from a backend's primitives, once for every backend:
//! everything outside the closure (key parsing, buffers, the signature a verify checks) is set
//! up here and never timed.

use super::keys;
use super::{KeyGenAlg, KxAlg, Op, Params, SigAlg, SigFamily};
use crate::backends::{self, Backend, BackendError};
use crate::measure::OpFn;

/// Fixed inputs: benchmarks process deterministic bytes so runs are reproducible.
pub(crate) const MESSAGE_BYTE: u8 = 0xa5;
pub(crate) const MAC_KEY: [u8; 32] = [0x0b; 32];
pub(crate) const AEAD_KEY: [u8; 32] = [0x42; 32];
/// The same nonce is used for every seal: acceptable for a benchmark, never for real data.
pub(crate) const NONCE: [u8; 12] = [0x24; 12];

/// Message bytes an operation processes per call: `size_bytes` for sized operations, else 0.
pub fn bytes_per_op(op: Op, params: &Params) -> usize {
    if op.is_sized() {
        params.size_bytes
    } else {
        0
    }
}

/// Prepare one instance of `op` on `backend`.
///
/// Errors: `Unsupported` when the backend lacks the algorithm for these parameters, or runs
/// in FIPS mode under a provider that does not serve it as approved (`fips::refusal`);
/// `Failed` when the library fails during preparation (bad key, failed self-check).
pub fn prepare(backend: &dyn Backend, op: Op, params: &Params) -> Result<OpFn, BackendError> {
    if let Some(why) = crate::fips::refusal(backend.info().backend, op, params) {
        return Err(BackendError::Unsupported(why));
    }
    let msg = vec![MESSAGE_BYTE; bytes_per_op(op, params)];
    Ok(match op {
        Op::Digest(alg) => {
            let mut d = backend.digest(alg)?;
            let mut out = Vec::with_capacity(64);
            Box::new(move || d.digest(&msg, &mut out))
        }
        Op::Hmac(alg) => {
            let mut m = backend.hmac(alg, &MAC_KEY)?;
            let mut out = Vec::with_capacity(64);
            Box::new(move || m.mac(&msg, &mut out))
        }
        Op::Seal(alg) => {
            let mut a = backend.aead(alg, &AEAD_KEY[..alg.key_len()])?;
            let mut out = Vec::with_capacity(msg.len() + 16);
            Box::new(move || a.seal(&NONCE, &[], &msg, &mut out))
        }
        Op::Open(alg) => {
            let mut a = backend.aead(alg, &AEAD_KEY[..alg.key_len()])?;
            let mut sealed = Vec::with_capacity(msg.len() + 16);
            a.seal(&NONCE, &[], &msg, &mut sealed)?;
            let mut out = Vec::with_capacity(msg.len());
            Box::new(move || a.open(&NONCE, &[], &sealed, &mut out))
        }
        Op::Sign(family) => {
            let (mut s, _) = crate::backends::signing_pair(backend, params.sig_alg(family), &keys::signing_key(family))?;
            Box::new(move || s.sign(&msg).map(drop))
        }
        Op::Verify(family) => {
            let alg = params.sig_alg(family);
            let key = keys::signing_key(family);
            let mut v = backend.verifier(alg, key.public)?;
            // Where the FIPS provider refuses to make the signature (SHA-1), another backend does.
            // (and where the backend signs only with keys it generates, the fixed key's signature is another's)
            let own = crate::fips::refusal(backend.info().backend, Op::Sign(family), params).is_none()
                && backend.generates_signing_keys().is_none();
            let sig = signature_for(backend, own, alg, &key, &msg)?;
            Box::new(move || match v.verify(&msg, &sig)? {
                true => Ok(()),
                false => Err(BackendError::Failed("a valid signature did not verify".into())),
            })
        }
        Op::Derive(alg) => {
            let (mut ours, peer_public) = agreement_with_peer(backend, alg)?;
            // The first derive parses and validates the peer's key: done here, untimed.
            ours.derive(&peer_public)?;
            Box::new(move || ours.derive(&peer_public).map(drop))
        }
        Op::DeriveValidated(alg) => {
            let (mut ours, peer_public) = agreement_with_peer(backend, alg)?;
            Box::new(move || ours.derive_validated(&peer_public).map(drop))
        }
        Op::Encaps(alg) => {
            let keypair = backend.kem_keypair(alg)?;
            let mut enc = backend.kem_encapsulator(alg, &keypair.encapsulation_key())?;
            Box::new(move || enc.encaps().map(drop))
        }
        Op::Decaps(alg) => {
            let mut keypair = backend.kem_keypair(alg)?;
            let (ciphertext, _) =
                backend.kem_encapsulator(alg, &keypair.encapsulation_key())?.encaps()?;
            Box::new(move || keypair.decaps(&ciphertext).map(drop))
        }
        // Key generation is the operation: each call makes a fresh key pair from the library's
        // random generator, encodes its public key (what would be sent or published) and drops
        // it. Run once here so a missing algorithm is "unsupported" before any timing.
        Op::Keygen(alg) => {
            let owned = backend.owned().ok_or_else(|| {
                BackendError::Failed(format!(
                    "backend {} cannot be re-created for key generation",
                    backend.info().backend
                ))
            })?;
            generate_key_pair(&*owned, alg)?;
            Box::new(move || generate_key_pair(&*owned, alg))
        }
    })
}

/// Our side of a key agreement and the peer's public key: the fixed key pairs of
/// [`keys::agreement_keys`], or for FFDH two key pairs the backend generates (outside the timed
/// loop). Errors: as [`Backend::agreement`].
pub(crate) fn agreement_with_peer(
    backend: &dyn Backend,
    alg: KxAlg,
) -> Result<(Box<dyn backends::Agreement>, Vec<u8>), BackendError> {
    Ok(match keys::agreement_keys(alg) {
        Some((ours, peer)) => (backend.agreement(alg, Some(&ours))?, peer.public.to_vec()),
        None => {
            let ours = backend.agreement(alg, None)?;
            let peer = backend.agreement(alg, None)?;
            (ours, peer.public_key())
        }
    })
}

/// One key pair for a `-keygen` operation, dropped at once.
pub(crate) fn generate_key_pair(backend: &dyn Backend, alg: KeyGenAlg) -> Result<(), BackendError> {
    match alg {
        KeyGenAlg::Kx(kx) => backend.key_share(kx).map(drop),
        KeyGenAlg::Kem(kem) => backend.kem_keypair(kem).map(drop),
        KeyGenAlg::Sig(family) => backend.sig_keygen(keygen_sig_alg(family), None).map(drop),
    }
}

/// The signature scheme a key-generation family generates keys for.
pub(crate) fn keygen_sig_alg(family: SigFamily) -> SigAlg {
    match family {
        SigFamily::MlDsa(level) => SigAlg::MlDsa(level),
        other => unreachable!("no -keygen operation for {other:?} (Op::parse refuses it)"),
    }
}

/// A signature of `msg` for a verify case: made by the backend itself (when `own`), or, where it
/// can verify but not sign this combination (ring verifies SHA-1 RSA signatures it cannot make;
/// OpenSSL's FIPS provider refuses SHA-1 signing, `own` false), by the first real backend that
/// can.
fn signature_for(
    backend: &dyn Backend,
    own: bool,
    alg: super::SigAlg,
    key: &keys::KeyPair,
    msg: &[u8],
) -> Result<Vec<u8>, BackendError> {
    let mine = if own {
        backend.signer(alg, key)
    } else {
        Err(BackendError::Unsupported(format!("{} does not sign with {alg:?} here", backend.info().backend)))
    };
    match mine {
        Ok(mut s) => s.sign(msg),
        Err(BackendError::Unsupported(reason)) => backends::NAMES
            .iter()
            .filter_map(|name| backends::by_name(name))
            .find_map(|other| other.signer(alg, key).ok())
            .ok_or(BackendError::Unsupported(reason))?
            .sign(msg),
        Err(e) => Err(e),
    }
}
