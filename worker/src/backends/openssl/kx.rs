//! The OpenSSL backend's key agreements (X25519, ECDH P-256, FFDH-2048 over RFC 3526 group 14):
//! key pairs imported or generated, and one derivation context kept per peer key.

use openssl::bn::{BigNum, BigNumContext};
use openssl::dh::Dh;
use openssl::ec::{EcGroup, EcKey, PointConversionForm};
use openssl::error::ErrorStack;
use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Private, Public};
use openssl::pkey_ctx::PkeyCtx;
use openssl_sys as ffi;

use super::{check_curve, ec_public_key, private_key_from_der};
use crate::backends::{check_len, failed, Agreement, BackendError, PeerCache, PeerKey, Result};
use crate::ops::keys::KeyPair;
use crate::ops::{DigestAlg, KxAlg, SigAlg, FFDH2048_PRIVATE_BITS};

/// Byte length of the RFC 3526 group 14 prime, hence of FFDH-2048 public keys and secrets.
const FFDH2048_LEN: usize = 256;

extern "C" {
    /// `int DH_set_length(DH *dh, long length)` (dh.h; deprecated in 3.0, still exported): the
    /// private exponent's length in bits for `DH_generate_key`; not bound by openssl-sys.
    fn DH_set_length(dh: *mut ffi::DH, length: std::ffi::c_long) -> std::ffi::c_int;
}

/// `Backend::agreement` of the OpenSSL backend.
pub(super) fn agreement(alg: KxAlg, ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
    match alg {
        KxAlg::X25519 => {
            let pkey = match ours {
                Some(ours) => PKey::private_key_from_raw_bytes(ours.private_raw, Id::X25519)
                    .map_err(failed)?,
                // A fresh key pair (`x25519-keygen`).
                None => PKey::generate_x25519().map_err(failed)?,
            };
            let public = pkey.raw_public_key().map_err(failed)?;
            Ok(Box::new(OsslAgreement::new(pkey, public, PeerKind::X25519)))
        }
        KxAlg::EcdhP256 => {
            let pkey = match ours {
                Some(ours) => private_key_from_der(ours.private_pkcs8)?,
                // A fresh key pair (an ephemeral ECDH share, e.g. IKE's KE payload).
                None => {
                    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).map_err(failed)?;
                    PKey::from_ec_key(EcKey::generate(&group).map_err(failed)?).map_err(failed)?
                }
            };
            let ec = pkey.ec_key().map_err(failed)?;
            check_curve(
                ec.group(),
                SigAlg::EcdsaP256 {
                    digest: DigestAlg::Sha256,
                },
            )?;
            let mut bn_ctx = BigNumContext::new().map_err(failed)?;
            let public = ec
                .public_key()
                .to_bytes(ec.group(), PointConversionForm::UNCOMPRESSED, &mut bn_ctx)
                .map_err(failed)?;
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).map_err(failed)?;
            Ok(Box::new(OsslAgreement::new(
                pkey,
                public,
                PeerKind::EcP256(group),
            )))
        }
        KxAlg::Ffdh2048 => {
            // The backend generates our key pair; a key passed in is not used. The private
            // exponent's length is set explicitly (OpenSSL 3's default for this group is
            // the same), so every backend draws the same length.
            use foreign_types::ForeignType;
            let params = modp2048()?;
            // SAFETY: `params` is a live DH owned here; DH_set_length only stores the length.
            if unsafe { DH_set_length(params.as_ptr(), FFDH2048_PRIVATE_BITS.into()) } != 1 {
                return Err(failed(ErrorStack::get()));
            }
            let dh = params.generate_key().map_err(failed)?;
            let bits = u32::try_from(dh.private_key().num_bits()).unwrap_or(0);
            let public = dh
                .public_key()
                .to_vec_padded(FFDH2048_LEN as i32)
                .map_err(failed)?;
            let pkey = PKey::from_dh(dh).map_err(failed)?;
            let mut agreement = OsslAgreement::new(pkey, public, PeerKind::Ffdh2048);
            agreement.private_bits = Some(bits);
            Ok(Box::new(agreement))
        }
    }
}

/// The RFC 3526 group 14 parameters (2048-bit MODP prime, generator 2).
fn modp2048() -> Result<Dh<openssl::pkey::Params>> {
    let p = BigNum::get_rfc3526_prime_2048().map_err(failed)?;
    let g = BigNum::from_u32(2).map_err(failed)?;
    Dh::from_pqg(p, None, g).map_err(failed)
}

/// How to parse a peer's public key for an [`OsslAgreement`].
enum PeerKind {
    X25519,
    EcP256(EcGroup),
    Ffdh2048,
}

/// Our private key, and a derivation context for the last peer key seen: the peer's key is
/// parsed and validated only when it changes, so repeated derivations with one peer time
/// `EVP_PKEY_derive` alone, as `openssl speed ecdh`/`ffdh2048` do. The validation is
/// `EVP_PKEY_derive_set_peer`'s own (`EVP_PKEY_public_check`, what every exchange through
/// OpenSSL's EVP API pays: in OpenSSL 3.0 the FFC full public-key validation, y^q mod p
/// included — from 3.4 on only the range for the named safe-prime groups (openssl/openssl pull
/// request 25088) — and for EC keys the point's order too); `derive_validated` pays it on every
/// call.
struct OsslAgreement {
    ours: PKey<Private>,
    public: Vec<u8>,
    kind: PeerKind,
    peer: PeerCache<PeerKey<PkeyCtx<Private>>>,
    out_len: usize,
    /// Bits of the FFDH private exponent; `None` for X25519 and ECDH.
    private_bits: Option<u32>,
}

impl OsslAgreement {
    fn new(ours: PKey<Private>, public: Vec<u8>, kind: PeerKind) -> Self {
        let out_len = match kind {
            PeerKind::X25519 => 32,
            PeerKind::EcP256(_) => 32,
            PeerKind::Ffdh2048 => FFDH2048_LEN,
        };
        OsslAgreement {
            ours,
            public,
            kind,
            peer: PeerCache::new(),
            out_len,
            private_bits: None,
        }
    }
}

impl PeerKind {
    /// A derivation context of `ours` with `peer_public` set as the peer.
    fn context_for(&self, ours: &PKey<Private>, peer_public: &[u8]) -> Result<PkeyCtx<Private>> {
        let peer: PKey<Public> = match self {
            PeerKind::X25519 => {
                PKey::public_key_from_raw_bytes(peer_public, Id::X25519).map_err(failed)?
            }
            PeerKind::EcP256(group) => {
                PKey::from_ec_key(ec_public_key(group, peer_public)?).map_err(failed)?
            }
            PeerKind::Ffdh2048 => {
                check_len("FFDH-2048 public key", peer_public, FFDH2048_LEN)?;
                let y = BigNum::from_slice(peer_public).map_err(failed)?;
                let dh = modp2048()?.set_public_key(y).map_err(failed)?;
                PKey::from_dh(dh).map_err(failed)?
            }
        };
        let mut ctx = PkeyCtx::new(ours).map_err(failed)?;
        ctx.derive_init().map_err(failed)?;
        // EVP_PKEY_derive_set_peer validates the peer's key (EVP_PKEY_public_check).
        ctx.derive_set_peer(&peer)
            .map_err(|e| BackendError::Failed(format!("peer public key refused: {e}")))?;
        Ok(ctx)
    }
}

impl Agreement for OsslAgreement {
    fn public_key(&self) -> Vec<u8> {
        self.public.clone()
    }

    fn derive(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        let ctx = &mut self
            .peer
            .get_or_parse(peer_public, |bytes| {
                Ok(PeerKey::new(bytes, self.kind.context_for(&self.ours, bytes)?))
            })?
            .key;
        let mut secret = vec![0; self.out_len];
        let n = ctx.derive(Some(&mut secret)).map_err(failed)?;
        if n < self.out_len {
            // FFDH: OpenSSL strips leading zero bytes; the secret is the prime's length,
            // big-endian (RFC 8446 §7.4.1), so put them back.
            secret.copy_within(..n, self.out_len - n);
            secret[..self.out_len - n].fill(0);
        }
        Ok(secret)
    }

    fn derive_validated(&mut self, peer_public: &[u8]) -> Result<Vec<u8>> {
        self.peer.forget();
        self.derive(peer_public)
    }

    fn private_bits(&self) -> Option<u32> {
        self.private_bits
    }
}
