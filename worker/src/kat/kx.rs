//! Known answers of key agreements and their key shares (`-derive`, `-derive-validated`,
//! `-keygen` of X25519, ECDH P-256 and FFDH-2048), for [`super::known_answer`] and the
//! cross-backend checks.

use super::{independent, length, same, unhex, vectors, Check};
use crate::backends::{Agreement, Backend, BackendError};
use crate::ops::keys::{self, KeyPair};
use crate::ops::{KxAlg, FFDH2048_PRIVATE_BITS};

/// Derive with `a` as `-derive` (`validated` false) or `-derive-validated` (true) does.
fn derive_as(a: &mut dyn Agreement, validated: bool, peer_public: &[u8]) -> std::result::Result<Vec<u8>, String> {
    if validated { a.derive_validated(peer_public) } else { a.derive(peer_public) }.map_err(|e| e.to_string())
}

/// Known answers of a key agreement, through `derive` or `derive_validated` (the timed path of
/// the case): RFC 7748 §6.1 (X25519), NIST CAVP (P-256), and for FFDH, whose key pairs the
/// backend generates, consistency on RFC 3526 group 14. Where the operation validates the
/// peer's key, a key that fails the validation must be refused and the key still work after.
pub(super) fn derive_kat(backend: &dyn Backend, alg: KxAlg, validated: bool) -> Result<(String, Check), BackendError> {
    let fixed = |ours: KeyPair, peer_public: &[u8], want: &[u8], bad_peer: Option<Vec<u8>>| -> Result<Check, BackendError> {
        let mut a = backend.agreement(alg, Some(&ours))?;
        Ok(same("our public key", &a.public_key(), ours.public).and_then(|()| {
            same("shared secret", &derive_as(&mut *a, validated, peer_public)?, want)?;
            if let Some(bad) = bad_peer {
                if derive_as(&mut *a, validated, &bad).is_ok() {
                    return Err("a peer public key off the curve was accepted".into());
                }
                same("shared secret after a refused peer key", &derive_as(&mut *a, validated, peer_public)?, want)?;
            }
            Ok(())
        }))
    };
    let with = if validated { ", the peer's key validated on every call" } else { "" };
    Ok(match alg {
        KxAlg::X25519 => (
            "RFC 7748 §6.1".into(),
            fixed(keys::X25519_ALICE, keys::X25519_BOB.public, &unhex(vectors::X25519_SHARED), None)?,
        ),
        KxAlg::EcdhP256 => {
            use vectors::cavp_ecdh_p256 as v;
            let (raw, public) = (unhex(v::D_IUT), unhex(v::Q_IUT));
            let ours = KeyPair { private_pkcs8: v::D_IUT_PKCS8, private_raw: &raw, public: &public };
            // The CAVS point with one bit of y flipped: no longer on the curve.
            let mut off_curve = unhex(v::Q_CAVS);
            off_curve[64] ^= 1;
            (
                format!("NIST CAVP ECC CDH Primitive, P-256 COUNT = 0{with}; a point off the curve refused"),
                fixed(ours, &unhex(v::Q_CAVS), &unhex(v::Z), Some(off_curve))?,
            )
        }
        KxAlg::Ffdh2048 => {
            let (check, validation) = ffdh_consistency(backend, validated)?;
            (
                format!(
                    "consistency over RFC 3526 group 14 (generated keys: no fixed-key vector applies){with}: \
                     {FFDH2048_PRIVATE_BITS}-bit private exponents, the public keys 1 and p − 1 refused; \
                     the library's validation of a peer's key: {validation}"
                ),
                check,
            )
        }
    })
}

/// FFDH-2048 on generated keys: both sides derive the same 256-byte secret, a third key
/// another; private exponents have at most [`FFDH2048_PRIVATE_BITS`] bits; the public keys 1 and
/// p − 1 (out of range) are refused, and the key works after. The key p − 2 (in range, of order
/// 2q) tells which validation the library makes: the full one (NIST SP 800-56A Rev. 3
/// §5.6.2.3.1, y^q = 1 mod p) refuses it, the range check alone accepts it; the second value
/// says which, in words.
fn ffdh_consistency(backend: &dyn Backend, validated: bool) -> Result<(Check, &'static str), BackendError> {
    let mut a = backend.agreement(KxAlg::Ffdh2048, None)?;
    let mut b = backend.agreement(KxAlg::Ffdh2048, None)?;
    let c = backend.agreement(KxAlg::Ffdh2048, None)?;
    let p = unhex(vectors::MODP2048_P);
    let minus = |k: u8| {
        let mut v = p.clone();
        *v.last_mut().expect("256 bytes") -= k;
        v
    };
    let full = derive_as(&mut *a, validated, &minus(2)).is_err();
    let check = (|| {
        let ab = derive_as(&mut *a, validated, &b.public_key())?;
        let ba = derive_as(&mut *b, validated, &a.public_key())?;
        let ac = derive_as(&mut *a, validated, &c.public_key())?;
        same("A·B vs B·A", &ab, &ba)?;
        length("secret", ab.len(), 256)?;
        if ab == ac {
            return Err("two different peers gave the same secret".into());
        }
        for k in [&a, &b, &c] {
            match k.private_bits() {
                // At most N bits, and (but for a chance of 2^-25 per key) more than N − 25.
                Some(n) if n <= FFDH2048_PRIVATE_BITS && n > FFDH2048_PRIVATE_BITS - 25 => {}
                other => {
                    return Err(format!(
                        "private exponent of {other:?} bits, expected {FFDH2048_PRIVATE_BITS} at most"
                    ))
                }
            }
        }
        let mut one = vec![0u8; 256];
        one[255] = 1;
        for (what, bad) in [("1", one), ("p − 1", minus(1))] {
            if derive_as(&mut *a, validated, &bad).is_ok() {
                return Err(format!("the peer public key {what} was accepted"));
            }
        }
        same("A·B after refused keys", &derive_as(&mut *a, validated, &b.public_key())?, &ab)
    })();
    let validation = if full {
        "full (2 ≤ y ≤ p − 2 and y^q = 1 mod p, NIST SP 800-56A Rev. 3 §5.6.2.3.1: the key p − 2, of order 2q, refused)"
    } else {
        "the range only (2 ≤ y ≤ p − 2: the key p − 2, of order 2q, accepted)"
    };
    Ok((check, validation))
}

/// The peer an independent implementation holds for a key agreement's checks: RFC 7748's Bob
/// (X25519), the fixed P-256 peer key of `ops::keys`, or a generated FFDH key pair.
pub(crate) fn fixed_peer(backend: &dyn Backend, alg: KxAlg) -> Result<Box<dyn Agreement>, BackendError> {
    match alg {
        KxAlg::X25519 => backend.agreement(alg, Some(&keys::X25519_BOB)),
        KxAlg::EcdhP256 => backend.agreement(alg, Some(&keys::ECDH_P256_PEER)),
        KxAlg::Ffdh2048 => backend.agreement(alg, None),
    }
}

/// Key-share generation (`x25519-keygen`, `ecdh-p256-keygen`, `ffdh-2048-keygen`): the public
/// key computed from a published private key where the library imports one (RFC 7748 §6.1's
/// Alice for X25519, NIST CAVP ECC CDH P-256 COUNT 0's d_IUT → Q_IUT), and the generated shares
/// that are timed: public keys of the right form that differ, two that agree with each other,
/// and one whose secret with an independent backend's key that backend derives too (after
/// validating the generated public key).
pub(super) fn kx_keygen_kat(backend: &dyn Backend, alg: KxAlg) -> Result<(String, Check), BackendError> {
    let (a, b, c) = (backend.key_share(alg)?, backend.key_share(alg)?, backend.key_share(alg)?);
    let (by, mut peer) = independent(backend, |o| fixed_peer(o, alg))?;
    // The published key pair whose public key the library must compute, where it imports one.
    use vectors::cavp_ecdh_p256 as v;
    let (cavp_raw, cavp_public) = (unhex(v::D_IUT), unhex(v::Q_IUT));
    let published = match alg {
        KxAlg::X25519 => Some((keys::X25519_ALICE, "RFC 7748 §6.1 (Alice's public key)")),
        KxAlg::EcdhP256 => Some((
            KeyPair { private_pkcs8: v::D_IUT_PKCS8, private_raw: &cavp_raw, public: &cavp_public },
            "NIST CAVP ECC CDH Primitive, P-256 COUNT = 0 (Q_IUT from d_IUT)",
        )),
        KxAlg::Ffdh2048 => None,
    };
    let imported = match published {
        Some((pair, _)) => match backend.agreement(alg, Some(&pair)) {
            Ok(k) => Some(same("public key of the published private key", &k.public_key(), pair.public)),
            Err(BackendError::Unsupported(_)) => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    let check = (|| {
        imported.clone().unwrap_or(Ok(()))?;
        let (pa, pb) = (a.public_key().to_vec(), b.public_key().to_vec());
        match alg {
            KxAlg::X25519 => length("generated public key", pa.len(), 32)?,
            KxAlg::EcdhP256 if pa.len() != 65 || pa[0] != 4 => {
                return Err(format!("generated public key is {} bytes, not an uncompressed point", pa.len()))
            }
            KxAlg::EcdhP256 => {}
            KxAlg::Ffdh2048 => length("generated public key", pa.len(), 256)?,
        }
        if pa == pb {
            return Err("two generated key pairs are the same".into());
        }
        let ab = a.derive(&pb).map_err(|e| e.to_string())?;
        same("A·B vs B·A", &ab, &b.derive(&pa).map_err(|e| e.to_string())?)?;
        let pc = c.public_key().to_vec();
        let with_peer = c.derive(&peer.public_key()).map_err(|e| e.to_string())?;
        let theirs = peer.derive_validated(&pc).map_err(|e| format!("the {by} backend refused a generated public key: {e}"))?;
        same(&format!("secret with the {by} backend's key, both sides"), &with_peer, &theirs)
    })();
    let source = match (imported, published) {
        (Some(_), Some((_, source))) => {
            format!("{source}, and generated key pairs agreeing with each other and with the {by} backend")
        }
        (_, published) => format!(
            "consistency check, not a known answer{}: generated key pairs of the right form that differ, \
             agree with each other and with the {by} backend",
            if published.is_some() { " (the library imports no private key to compute a published public key from)" } else { "" }
        ),
    };
    Ok((source, check))
}
