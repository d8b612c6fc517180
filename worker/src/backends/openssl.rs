//! The OpenSSL backend: the system OpenSSL (3.x) through the `openssl` crate — or, in a worker
//! built with the `vendored-openssl` feature (`cryptoperf setup openssl@3.6`), an OpenSSL 3.6
//! that `openssl-src` builds from source and links statically. The code is the same for both;
//! `info()` reports the version of the library actually linked (`OpenSSL_version`), so every
//! result says which OpenSSL was measured.
//!
//! Everything that can be done once is done at prepare time, as `openssl speed` does: algorithms
//! are fetched explicitly (an implicit fetch per call costs a lock and a lookup in OpenSSL 3),
//! keys are parsed and contexts allocated once, and the hot path only re-initialises a context:
//!
//! - digests: one reused `EVP_MD_CTX` (init, update, final);
//! - AEADs: one `EVP_CIPHER_CTX` per direction with the key set once; a call sets only the IV;
//! - RSA/ECDSA: one `EVP_PKEY_CTX` initialised for signing (padding, digest, salt length set
//!   once), and the message hashed with a reused `EVP_MD_CTX` before `EVP_PKEY_sign`/`verify`
//!   — the same calls `openssl speed rsa2048`/`ecdsap256` time, plus the hash of the message;
//! - Ed25519: one `EVP_MD_CTX` initialised for `EVP_DigestSign`/`Verify` and reused; from
//!   OpenSSL 3.2 on a finished one-shot context refuses a second call, so there it is
//!   re-initialised for the key it holds before each call, as `openssl speed` 3.6 does;
//! - key agreement: one `EVP_PKEY_CTX` with the peer set, kept while the peer's key is the same;
//! - XTS-AES (sector encryption, the `storage` workload): one `EVP_CIPHER_CTX` per direction
//!   with the key set once (`AES-128-XTS`/`AES-256-XTS` fetched explicitly, as
//!   `Cipher::aes_128_xts`/`aes_256_xts` name them); a sector sets only the IV (the tweak) and
//!   runs one in-place `EVP_CipherUpdate` over the whole data unit (XTS takes a data unit in one
//!   call, and its final step outputs nothing, so it is not called).
//!
//! - HMAC: one `EVP_MAC_CTX` with the key set once; a call re-initialises it without a key
//!   (OpenSSL then reuses the prepared key), as `openssl speed -hmac` does. The `openssl` crate
//!   has no `EVP_MAC` binding, so this part goes through `openssl-sys` directly.
//!
//! OpenSSL 3.0 has no ML-KEM and no ML-DSA (both arrived in OpenSSL 3.5), so the KEM methods
//! keep the trait's "unsupported" default and ML-DSA is refused with that reason — also when
//! linked with 3.6, as this backend does not call them yet.

use std::ffi::{c_char, CString};
use std::ptr;

use openssl::bn::BigNumContext;
use openssl::cipher::Cipher;
use openssl::cipher_ctx::CipherCtx;
use openssl::error::ErrorStack;
use openssl::ec::{EcGroup, EcKey, EcPoint};
use openssl::md::Md;
use openssl::md_ctx::MdCtx;
use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Private, Public};
use openssl::pkey_ctx::PkeyCtx;
use openssl::rsa::{Padding, Rsa};
use openssl::sign::RsaPssSaltlen;
use openssl_sys as ffi;

use super::{
    check_aead_key, check_rsa_bits, check_xts_key, check_xts_unit, failed, split_tag, xts_tweak, Aead, Agreement, Backend, BackendError,
    Digest, LibraryInfo, Mac, Result, SectorCipher, Signer, Verifier, XtsBits,
};
use crate::cpu::{CapVector, Capabilities};

mod kx;
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KxAlg, RsaPadding, SigAlg};

/// The OpenSSL library.
pub struct OpenSsl;

impl Backend for OpenSsl {
    fn info(&self) -> LibraryInfo {
        let full = openssl::version::version(); // "OpenSSL 3.0.19 27 Jan 2026"
        LibraryInfo {
            backend: "openssl",
            library: "OpenSSL".into(),
            library_version: full.strip_prefix("OpenSSL ").unwrap_or(full).to_string(),
            fips: crate::fips::mode("openssl"),
            fips_provider: crate::fips::provider("openssl"),
        }
    }

    fn capabilities(&self) -> Capabilities {
        cpu_settings()
    }

    fn digest(&self, alg: DigestAlg) -> Result<Box<dyn Digest>> {
        Ok(Box::new(OsslDigest {
            md: fetch_md(alg)?,
            ctx: MdCtx::new().map_err(failed)?,
            len: alg.output_len(),
        }))
    }

    fn hmac(&self, alg: DigestAlg, key: &[u8]) -> Result<Box<dyn Mac>> {
        Ok(Box::new(OsslHmac::new(alg, key)?))
    }

    fn aead(&self, alg: AeadAlg, key: &[u8]) -> Result<Box<dyn Aead>> {
        check_aead_key(alg, key)?;
        let name = match alg {
            AeadAlg::Aes128Gcm => "AES-128-GCM",
            AeadAlg::Aes256Gcm => "AES-256-GCM",
            AeadAlg::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        };
        let cipher = Cipher::fetch(None, name, None).map_err(failed)?;
        let mut enc = CipherCtx::new().map_err(failed)?;
        enc.encrypt_init(Some(&cipher), Some(key), None)
            .map_err(failed)?;
        let mut dec = CipherCtx::new().map_err(failed)?;
        dec.decrypt_init(Some(&cipher), Some(key), None)
            .map_err(failed)?;
        if enc.iv_length() != AeadAlg::NONCE_LEN {
            return Err(BackendError::Failed(format!(
                "OpenSSL's {name} has a {}-byte IV, expected {}",
                enc.iv_length(),
                AeadAlg::NONCE_LEN
            )));
        }
        Ok(Box::new(OsslAead { enc, dec }))
    }

    fn xts(&self, bits: XtsBits, key: &[u8]) -> Result<Box<dyn SectorCipher>> {
        check_xts_key(bits, key)?;
        let cipher = Cipher::fetch(None, bits.name(), None).map_err(failed)?;
        let mut enc = CipherCtx::new().map_err(failed)?;
        enc.encrypt_init(Some(&cipher), Some(key), None).map_err(failed)?;
        let mut dec = CipherCtx::new().map_err(failed)?;
        dec.decrypt_init(Some(&cipher), Some(key), None).map_err(failed)?;
        if enc.iv_length() != 16 {
            return Err(BackendError::Failed(format!(
                "OpenSSL's {} has a {}-byte IV, expected the 16-byte tweak",
                bits.name(),
                enc.iv_length()
            )));
        }
        Ok(Box::new(OsslXts { enc, dec }))
    }

    fn signer(&self, alg: SigAlg, key: &KeyPair) -> Result<Box<dyn Signer>> {
        match alg {
            SigAlg::MlDsa(level) => super::unsupported(no_ml_dsa(level)),
            SigAlg::Ed25519 => {
                let pkey = PKey::private_key_from_raw_bytes(key.private_raw, Id::ED25519)
                    .map_err(failed)?;
                let mut ctx = MdCtx::new().map_err(failed)?;
                ctx.digest_sign_init(None, &pkey).map_err(failed)?;
                Ok(Box::new(OsslEd25519Signer {
                    ctx,
                    reinit: false,
                }))
            }
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                let pkey = private_key_from_der(key.private_pkcs8)?;
                check_rsa_bits(pkey.bits() as usize, bits)?;
                let mut ctx = PkeyCtx::new(&pkey).map_err(failed)?;
                ctx.sign_init().map_err(failed)?;
                let md = fetch_md(digest)?;
                set_rsa_params(&mut ctx, &md, padding)?;
                Ok(Box::new(OsslPkeySigner::new(ctx, md, digest, pkey.size())?))
            }
            SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest } => {
                let pkey = private_key_from_der(key.private_pkcs8)?;
                let ec = pkey.ec_key().map_err(failed)?;
                check_curve(ec.group(), alg)?;
                let mut ctx = PkeyCtx::new(&pkey).map_err(failed)?;
                ctx.sign_init().map_err(failed)?;
                let md = fetch_md(digest)?;
                ctx.set_signature_md(&md).map_err(failed)?;
                Ok(Box::new(OsslPkeySigner::new(ctx, md, digest, pkey.size())?))
            }
        }
    }

    fn verifier(&self, alg: SigAlg, public: &[u8]) -> Result<Box<dyn Verifier>> {
        match alg {
            SigAlg::MlDsa(level) => super::unsupported(no_ml_dsa(level)),
            SigAlg::Ed25519 => {
                let pkey = PKey::public_key_from_raw_bytes(public, Id::ED25519).map_err(failed)?;
                let mut ctx = MdCtx::new().map_err(failed)?;
                ctx.digest_verify_init(None, &pkey).map_err(failed)?;
                Ok(Box::new(OsslEd25519Verifier { ctx, reinit: false }))
            }
            SigAlg::Rsa {
                bits,
                digest,
                padding,
            } => {
                let rsa = Rsa::public_key_from_der_pkcs1(public).map_err(failed)?;
                let pkey = PKey::from_rsa(rsa).map_err(failed)?;
                check_rsa_bits(pkey.bits() as usize, bits)?;
                let mut ctx = PkeyCtx::new(&pkey).map_err(failed)?;
                ctx.verify_init().map_err(failed)?;
                let md = fetch_md(digest)?;
                set_rsa_params(&mut ctx, &md, padding)?;
                Ok(Box::new(OsslPkeyVerifier::new(ctx, md, digest)?))
            }
            SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest } => {
                let group = EcGroup::from_curve_name(curve_nid(alg)).map_err(failed)?;
                let pkey = PKey::from_ec_key(ec_public_key(&group, public)?).map_err(failed)?;
                let mut ctx = PkeyCtx::new(&pkey).map_err(failed)?;
                ctx.verify_init().map_err(failed)?;
                let md = fetch_md(digest)?;
                ctx.set_signature_md(&md).map_err(failed)?;
                Ok(Box::new(OsslPkeyVerifier::new(ctx, md, digest)?))
            }
        }
    }

    fn agreement(&self, alg: KxAlg, ours: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        kx::agreement(alg, ours)
    }
}

extern "C" {
    /// `const char *OPENSSL_info(int type)` (OpenSSL >= 3.0, crypto.h); not bound by openssl-sys.
    fn OPENSSL_info(kind: std::ffi::c_int) -> *const c_char;
}
/// `OPENSSL_INFO_CPU_SETTINGS` from crypto.h.
const OPENSSL_INFO_CPU_SETTINGS: std::ffi::c_int = 1008;

/// The capability vector this process's libcrypto uses. OpenSSL 3.0 does not export
/// `OPENSSL_ia32cap_P`, but `OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS)` formats it, in process,
/// from that very array after `OPENSSL_cpuid_setup` applied `OPENSSL_ia32cap`
/// (`OPENSSL_ia32cap=0x<word0>:0x<word1> env:<variable>`, crypto/info.c); `openssl info
/// -cpusettings` prints the same string.
fn cpu_settings() -> Capabilities {
    if !cfg!(target_arch = "x86_64") {
        return Capabilities::NotMaskable("OpenSSL's CPU masks are defined here for x86-64 only".into());
    }
    ffi::init();
    // SAFETY: OPENSSL_info returns NULL or a pointer to a static NUL-terminated string.
    let text = unsafe {
        let p = OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS);
        if p.is_null() {
            return Capabilities::Unreadable("OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS) returned NULL".into());
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    };
    match CapVector::parse_openssl_info(&text) {
        Some(vector) => Capabilities::Vector { vector, source: "OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS)" },
        None => Capabilities::Unreadable(format!("OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS) returned '{text}'")),
    }
}

/// Fetch a digest explicitly, so that initialising a context with it does not fetch again.
fn fetch_md(alg: DigestAlg) -> Result<Md> {
    Md::fetch(None, md_name(alg), None).map_err(failed)
}

/// OpenSSL 3's canonical name of a digest.
fn md_name(alg: DigestAlg) -> &'static str {
    match alg {
        DigestAlg::Sha1 => "SHA1",
        DigestAlg::Sha256 => "SHA2-256",
        DigestAlg::Sha384 => "SHA2-384",
        DigestAlg::Sha512 => "SHA2-512",
        DigestAlg::Sha3_256 => "SHA3-256",
    }
}

/// Parse a PKCS#8 `PrivateKeyInfo` (the encoding of [`KeyPair::private_pkcs8`]).
fn private_key_from_der(der: &[u8]) -> Result<PKey<Private>> {
    PKey::private_key_from_der(der).map_err(failed)
}

/// Why OpenSSL has no ML-DSA here.
fn no_ml_dsa(level: crate::ops::MlDsaLevel) -> String {
    format!(
        "the OpenSSL backend has no {} ({} is linked; OpenSSL has ML-DSA from 3.5 on, and this \
         backend keeps to what 3.0 has)",
        level.name(),
        openssl::version::version()
    )
}

/// The OpenSSL curve of an ECDSA scheme.
fn curve_nid(alg: SigAlg) -> Nid {
    match alg {
        SigAlg::EcdsaP384 { .. } => Nid::SECP384R1,
        _ => Nid::X9_62_PRIME256V1,
    }
}

/// Refuse an EC key on another curve than the scheme's.
fn check_curve(group: &openssl::ec::EcGroupRef, alg: SigAlg) -> Result<()> {
    let want = curve_nid(alg);
    match group.curve_name() {
        Some(nid) if nid == want => Ok(()),
        other => Err(BackendError::Failed(format!(
            "EC key is on curve {other:?}, expected {want:?}"
        ))),
    }
}

/// Parse a SEC1 point into an EC public key on `group` (OpenSSL checks it is on the curve).
fn ec_public_key(group: &EcGroup, sec1: &[u8]) -> Result<EcKey<Public>> {
    let mut bn_ctx = BigNumContext::new().map_err(failed)?;
    let point = EcPoint::from_bytes(group, sec1, &mut bn_ctx).map_err(failed)?;
    EcKey::from_public_key(group, &point).map_err(failed)
}

/// Set the signature digest, then RSA padding (and for PSS: MGF1 with the same digest, salt
/// length = digest length) on a context initialised for signing or verifying. The digest goes
/// first: OpenSSL's FIPS provider checks it when PSS padding is set, and the context's digest
/// until then is SHA-1, which it refuses for signing ("digest not allowed").
fn set_rsa_params<T>(ctx: &mut PkeyCtx<T>, md: &Md, padding: RsaPadding) -> Result<()> {
    ctx.set_signature_md(md).map_err(failed)?;
    match padding {
        RsaPadding::Pkcs1 => ctx.set_rsa_padding(Padding::PKCS1).map_err(failed)?,
        RsaPadding::Pss => {
            ctx.set_rsa_padding(Padding::PKCS1_PSS).map_err(failed)?;
            ctx.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)
                .map_err(failed)?;
            ctx.set_rsa_mgf1_md(md).map_err(failed)?;
        }
    }
    Ok(())
}

/// A digest with its algorithm fetched and its context allocated once.
struct OsslDigest {
    md: Md,
    ctx: MdCtx,
    len: usize,
}

impl Digest for OsslDigest {
    fn digest(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(self.len, 0);
        self.ctx.digest_init(&self.md).map_err(failed)?;
        self.ctx.digest_update(data).map_err(failed)?;
        self.ctx.digest_final(out).map_err(failed)?;
        Ok(())
    }
}

/// HMAC through `EVP_MAC`: the context is created and keyed once; each call re-initialises it
/// with a null key, which OpenSSL 3 defines as "keep the key already set".
struct OsslHmac {
    ctx: *mut ffi::EVP_MAC_CTX,
    len: usize,
}

// Declared here because `openssl-sys` 0.9 does not bind it (it is in libcrypto since 3.0).
extern "C" {
    fn OSSL_PARAM_construct_utf8_string(
        key: *const c_char,
        buf: *mut c_char,
        bsize: usize,
    ) -> ffi::OSSL_PARAM;
}

impl OsslHmac {
    /// Fetch HMAC, create its context and set digest and key. Errors: `Failed` with OpenSSL's
    /// error queue when any step fails.
    fn new(alg: DigestAlg, key: &[u8]) -> Result<Self> {
        let digest = CString::new(md_name(alg)).expect("digest names have no NUL");
        // SAFETY: every pointer passed is valid for the call; `mac` is freed once the context
        // holds its own reference; `ctx` is owned by the returned value and freed in Drop.
        unsafe {
            let mac = ffi::EVP_MAC_fetch(ptr::null_mut(), c"HMAC".as_ptr(), ptr::null());
            if mac.is_null() {
                return Err(failed(ErrorStack::get()));
            }
            let ctx = ffi::EVP_MAC_CTX_new(mac);
            ffi::EVP_MAC_free(mac);
            if ctx.is_null() {
                return Err(failed(ErrorStack::get()));
            }
            let hmac = OsslHmac { ctx, len: alg.output_len() };
            let params = [
                OSSL_PARAM_construct_utf8_string(
                    c"digest".as_ptr(),
                    digest.as_ptr() as *mut c_char,
                    0,
                ),
                ffi::OSSL_PARAM_construct_end(),
            ];
            if ffi::EVP_MAC_init(ctx, key.as_ptr(), key.len(), params.as_ptr()) != 1 {
                return Err(failed(ErrorStack::get()));
            }
            Ok(hmac)
        }
    }
}

impl Mac for OsslHmac {
    fn mac(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(self.len, 0);
        let mut written = 0usize;
        // SAFETY: `self.ctx` is a live, keyed context; `data` and `out` are valid for their
        // lengths.
        let ok = unsafe {
            ffi::EVP_MAC_init(self.ctx, ptr::null(), 0, ptr::null()) == 1
                && ffi::EVP_MAC_update(self.ctx, data.as_ptr(), data.len()) == 1
                && ffi::EVP_MAC_final(self.ctx, out.as_mut_ptr(), &mut written, out.len()) == 1
        };
        if !ok {
            return Err(failed(ErrorStack::get()));
        }
        out.truncate(written);
        Ok(())
    }
}

impl Drop for OsslHmac {
    fn drop(&mut self) {
        // SAFETY: `ctx` was created by EVP_MAC_CTX_new and is freed exactly once.
        unsafe { ffi::EVP_MAC_CTX_free(self.ctx) }
    }
}

/// An AEAD with one cipher context per direction, each with the key already set.
struct OsslAead {
    enc: CipherCtx,
    dec: CipherCtx,
}

impl Aead for OsslAead {
    fn seal(
        &mut self,
        nonce: &[u8; 12],
        aad: &[u8],
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let n = plaintext.len();
        // `resize` without `clear`: a buffer reused at the same size is not zeroed again.
        out.resize(n + AeadAlg::TAG_LEN, 0);
        let ctx = &mut self.enc;
        ctx.encrypt_init(None, None, Some(nonce)).map_err(failed)?;
        if !aad.is_empty() {
            ctx.cipher_update(aad, None).map_err(failed)?;
        }
        let written = ctx
            .cipher_update(plaintext, Some(&mut out[..n]))
            .map_err(failed)?;
        let fin = ctx.cipher_final(&mut out[written..n]).map_err(failed)?;
        if written + fin != n {
            return Err(BackendError::Failed(format!(
                "OpenSSL wrote {} ciphertext bytes for {n} plaintext bytes",
                written + fin
            )));
        }
        ctx.tag(&mut out[n..]).map_err(failed)
    }

    fn open(
        &mut self,
        nonce: &[u8; 12],
        aad: &[u8],
        sealed: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let (ciphertext, tag) = split_tag(sealed).inspect_err(|_| out.clear())?;
        let n = ciphertext.len();
        out.resize(n, 0);
        let ctx = &mut self.dec;
        let result = (|| {
            ctx.decrypt_init(None, None, Some(nonce))?;
            if !aad.is_empty() {
                ctx.cipher_update(aad, None)?;
            }
            let written = ctx.cipher_update(ciphertext, Some(&mut out[..n]))?;
            ctx.set_tag(tag)?;
            ctx.cipher_final(&mut out[written..n])
        })();
        if let Err(e) = result {
            // Never hand out unauthenticated plaintext.
            out.clear();
            let reason = e.to_string();
            return Err(BackendError::Failed(if reason.is_empty() {
                "authentication failed (tag mismatch)".into()
            } else {
                format!("authentication failed: {reason}")
            }));
        }
        Ok(())
    }
}

/// XTS-AES with one cipher context per direction, each with the key already set.
struct OsslXts {
    enc: CipherCtx,
    dec: CipherCtx,
}

impl OsslXts {
    /// Set the tweak of `sector` and run the whole data unit through `ctx`, in place.
    fn unit(ctx: &mut CipherCtx, encrypt: bool, sector: u64, buf: &mut [u8]) -> Result<()> {
        check_xts_unit(buf)?;
        let tweak = xts_tweak(sector);
        if encrypt {
            ctx.encrypt_init(None, None, Some(&tweak)).map_err(failed)?;
        } else {
            ctx.decrypt_init(None, None, Some(&tweak)).map_err(failed)?;
        }
        let n = buf.len();
        let written = ctx.cipher_update_inplace(buf, n).map_err(failed)?;
        if written != n {
            return Err(BackendError::Failed(format!("OpenSSL's XTS wrote {written} bytes for a {n}-byte data unit")));
        }
        Ok(())
    }
}

impl SectorCipher for OsslXts {
    fn encrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        Self::unit(&mut self.enc, true, sector, buf)
    }
    fn decrypt_sector(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        Self::unit(&mut self.dec, false, sector, buf)
    }
}

/// RSA or ECDSA signing: a key context set up once; each call hashes the message with a reused
/// digest context and signs the hash with `EVP_PKEY_sign`.
struct OsslPkeySigner {
    ctx: PkeyCtx<Private>,
    hasher: MdCtx,
    md: Md,
    hash: [u8; 64],
    hash_len: usize,
    max_sig_len: usize,
}

impl OsslPkeySigner {
    fn new(ctx: PkeyCtx<Private>, md: Md, digest: DigestAlg, max_sig_len: usize) -> Result<Self> {
        Ok(OsslPkeySigner {
            ctx,
            hasher: MdCtx::new().map_err(failed)?,
            md,
            hash: [0; 64],
            hash_len: digest.output_len(),
            max_sig_len,
        })
    }
}

impl Signer for OsslPkeySigner {
    fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        let hash = &mut self.hash[..self.hash_len];
        hash_into(&mut self.hasher, &self.md, msg, hash)?;
        let mut sig = vec![0; self.max_sig_len];
        let n = self.ctx.sign(hash, Some(&mut sig)).map_err(failed)?;
        sig.truncate(n);
        Ok(sig)
    }
}

/// RSA or ECDSA verification, set up like [`OsslPkeySigner`].
struct OsslPkeyVerifier {
    ctx: PkeyCtx<Public>,
    hasher: MdCtx,
    md: Md,
    hash: [u8; 64],
    hash_len: usize,
}

impl OsslPkeyVerifier {
    fn new(ctx: PkeyCtx<Public>, md: Md, digest: DigestAlg) -> Result<Self> {
        Ok(OsslPkeyVerifier {
            ctx,
            hasher: MdCtx::new().map_err(failed)?,
            md,
            hash: [0; 64],
            hash_len: digest.output_len(),
        })
    }
}

impl Verifier for OsslPkeyVerifier {
    fn verify(&mut self, msg: &[u8], sig: &[u8]) -> Result<bool> {
        let hash = &mut self.hash[..self.hash_len];
        hash_into(&mut self.hasher, &self.md, msg, hash)?;
        // OpenSSL reports a malformed signature (bad DER, wrong length) as an error rather
        // than as "not valid"; either way the signature does not verify.
        Ok(self.ctx.verify(hash, sig).unwrap_or(false))
    }
}

/// Hash `msg` into `out` (exactly the digest's length) with a reused context.
fn hash_into(ctx: &mut MdCtx, md: &Md, msg: &[u8], out: &mut [u8]) -> Result<()> {
    ctx.digest_init(md).map_err(failed)?;
    ctx.digest_update(msg).map_err(failed)?;
    ctx.digest_final(out).map_err(failed)?;
    Ok(())
}

/// `EVP_R_FINAL_ERROR` (evperr.h): a one-shot context used again after it finished (OpenSSL
/// >= 3.2 refuses that; 3.0 allows it).
const EVP_R_FINAL_ERROR: std::ffi::c_int = 188;

/// Re-initialise a one-shot `EVP_DigestSign`/`EVP_DigestVerify` context for the key it already
/// holds: `EVP_DigestSignInit(ctx, NULL, NULL, NULL, NULL)`, which keeps the key and the
/// fetched algorithm — what `openssl speed` (3.6, apps/speed.c, EdDSA) calls before each
/// operation.
fn reinit_one_shot(ctx: &mut MdCtx, verify: bool) -> Result<()> {
    use foreign_types::ForeignTypeRef;
    let p = ctx.as_ptr();
    // SAFETY: `p` is a valid EVP_MD_CTX that was initialised with a key (its EVP_PKEY_CTX
    // holds the key); every other argument may be NULL.
    let rc = unsafe {
        if verify {
            ffi::EVP_DigestVerifyInit(p, ptr::null_mut(), ptr::null(), ptr::null_mut(), ptr::null_mut())
        } else {
            ffi::EVP_DigestSignInit(p, ptr::null_mut(), ptr::null(), ptr::null_mut(), ptr::null_mut())
        }
    };
    if rc == 1 {
        Ok(())
    } else {
        Err(failed(ErrorStack::get()))
    }
}

/// Whether an error is OpenSSL refusing to reuse a finished one-shot context.
fn is_final_error(e: &ErrorStack) -> bool {
    e.errors().iter().any(|x| x.reason_code() == EVP_R_FINAL_ERROR)
}

/// Ed25519 signing with one `EVP_DigestSign` context, reused across calls as `openssl speed`
/// 3.0 does. Where the library refuses the reuse (OpenSSL >= 3.2), the context is
/// re-initialised (`reinit_one_shot`) before every call from the first refusal on.
struct OsslEd25519Signer {
    ctx: MdCtx,
    reinit: bool,
}

impl Signer for OsslEd25519Signer {
    fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        let mut sig = vec![0; 64];
        if self.reinit {
            reinit_one_shot(&mut self.ctx, false)?;
        }
        match self.ctx.digest_sign(msg, Some(&mut sig)) {
            Ok(n) => sig.truncate(n),
            Err(_) if !self.reinit => {
                self.reinit = true;
                return self.sign(msg);
            }
            Err(e) => return Err(failed(e)),
        }
        Ok(sig)
    }
}

/// Ed25519 verification with one `EVP_DigestVerify` context, reused across calls as
/// `openssl speed` 3.0 does; re-initialised before every call once the library refuses the
/// reuse (OpenSSL >= 3.2, `EVP_R_FINAL_ERROR`), as for signing.
struct OsslEd25519Verifier {
    ctx: MdCtx,
    reinit: bool,
}

impl Verifier for OsslEd25519Verifier {
    fn verify(&mut self, msg: &[u8], sig: &[u8]) -> Result<bool> {
        if self.reinit {
            reinit_one_shot(&mut self.ctx, true)?;
        }
        // OpenSSL 3.0 reports an invalid Ed25519 signature as an error with an empty error
        // queue (not as 0), and a malformed one as an error too: both are "not valid". The
        // context stays usable afterwards (checked in the tests). A refused reuse is not an
        // answer: it switches to re-initialising and asks again.
        match self.ctx.digest_verify(msg, sig) {
            Ok(valid) => Ok(valid),
            Err(e) if !self.reinit && is_final_error(&e) => {
                self.reinit = true;
                self.verify(msg, sig)
            }
            Err(_) => Ok(false),
        }
    }
}

/// What only this backend has: the library version it reports and the reuse of one-shot
/// Ed25519 contexts. Everything else (known answers, round trips, tampering, interoperation,
/// what is unsupported) is checked on every backend by `backends::conformance`.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::keys;
    use crate::ops::SigFamily;

    #[test]
    fn info_reports_runtime_version() {
        let info = OpenSsl.info();
        assert_eq!(info.library, "OpenSSL");
        assert!(
            info.library_version.starts_with('3'),
            "{}",
            info.library_version
        );
        // FIPS mode only in the FIPS build, and there only with the host's FIPS provider.
        assert_eq!(info.fips, cfg!(feature = "fips") && crate::fips::unavailable("openssl").is_none());
    }

    /// OpenSSL >= 3.2 refuses a second call on a finished one-shot context.
    fn refuses_one_shot_reuse() -> bool {
        openssl::version::number() >= 0x3020_0000
    }

    #[test]
    fn ed25519_contexts_are_reused() {
        // OpenSSL 3.0 lets an EVP_DigestSign/Verify context be reused, as `openssl speed` does;
        // this keeps the hot path free of re-initialisation. Newer OpenSSL refuses: then the
        // context is re-initialised for its key (the signatures must not change).
        let key = keys::signing_key(SigFamily::Ed25519);
        let pkey = PKey::private_key_from_raw_bytes(key.private_raw, Id::ED25519).unwrap();
        let mut ctx = MdCtx::new().unwrap();
        ctx.digest_sign_init(None, &pkey).unwrap();
        let mut s = OsslEd25519Signer { ctx, reinit: false };
        let sig = s.sign(b"a").unwrap();
        assert_eq!(sig, s.sign(b"a").unwrap());
        assert_eq!(sig, s.sign(b"a").unwrap());
        assert_eq!(s.reinit, refuses_one_shot_reuse());
        let public = PKey::public_key_from_raw_bytes(key.public, Id::ED25519).unwrap();
        let mut ctx = MdCtx::new().unwrap();
        ctx.digest_verify_init(None, &public).unwrap();
        let mut v = OsslEd25519Verifier { ctx, reinit: false };
        assert!(v.verify(b"a", &sig).unwrap());
        assert!(!v.verify(b"b", &sig).unwrap());
        assert!(
            v.verify(b"a", &sig).unwrap(),
            "the context survives a failed verification"
        );
        assert!(v.verify(b"a", &sig).unwrap());
        assert_eq!(v.reinit, refuses_one_shot_reuse());
    }
}

#[cfg(test)]
mod capability_tests {
    use super::*;

    #[test]
    fn reads_the_vector_libcrypto_uses() {
        let caps = OpenSsl.capabilities();
        let Capabilities::Vector { vector, source } = caps else {
            if cfg!(target_arch = "x86_64") {
                panic!("no capability vector on x86-64: {caps:?}");
            }
            return;
        };
        assert_eq!(source, "OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS)");
        if std::env::var_os(crate::cpu::MASK_ENV).is_none() {
            // Unmasked, OpenSSL's AES-NI and PCLMULQDQ bits are the CPU's.
            let hw = CapVector::from_cpuid().unwrap();
            for f in ["aes", "pclmulqdq", "sha", "avx2"] {
                assert_eq!(vector.has(f), hw.has(f), "{f}");
            }
        }
    }
}
