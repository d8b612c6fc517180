//! The pkcs11 backend: a PKCS#11 token (a hardware security module, a cloud HSM, a smart card,
//! an accelerator's token, or SoftHSM2 in software) through the `cryptoki` binding.
//!
//! Which token, and how to log in, is this process's environment, never a request or a study
//! file (a PIN must not reach the store, a report or a log):
//!
//! - `CRYPTOPERF_PKCS11_MODULE`: the path of the token's PKCS#11 module (a `.so`);
//! - `CRYPTOPERF_PKCS11_TOKEN`: the token's label (default: the first slot holding a token);
//! - `CRYPTOPERF_PKCS11_PIN_FILE`: a file whose first line is the user PIN, or
//!   `CRYPTOPERF_PKCS11_PIN`: the PIN itself.
//!
//! The module is loaded, the token found and the user logged in once per process, on first use
//! ([`token`]); a wrong PIN is tried once and never again in this process (the orchestrator stops
//! a study at the first such failure, so a token's lockout counter is not run down).
//!
//! Each prepared primitive opens a session of its own (a PKCS#11 session is used by one thread
//! at a time) and imports the operation's fixed key into it as a *session object*
//! (`CKA_TOKEN` false): the token holds it only while that session is open and forgets it when
//! the session closes or the process dies, so nothing is left on the token, even after a
//! `kill -9`. Importing the very keys the software backends use is what lets a signature made
//! on the token be checked by them, and theirs by the token. The timed call is the token's
//! one-shot function (`C_Sign`, `C_Verify`, `C_Digest`, `C_Encrypt`, `C_Decrypt`), preceded by
//! its `…Init`, as every PKCS#11 application calls them.
//!
//! What the token lacks is "unsupported" with the mechanism it lacks, read from its
//! `C_GetMechanismList`. ECDSA signatures come back as the raw r ‖ s PKCS#11 defines; they are
//! encoded as DER `Ecdsa-Sig-Value` (what the other backends make) by OpenSSL, outside the
//! token. A token with CKM_ECDSA but not CKM_ECDSA_SHA256 (SoftHSM2) signs a digest computed on
//! the host by OpenSSL, as OpenSSL's own PKCS#11 engine does: that hash is then part of the
//! timed operation, and of the host CPU it costs. A token refusing an HMAC key shorter than
//! its minimum (`C_GetMechanismInfo`) says so as unsupported.

use std::sync::{Mutex, OnceLock};

use cryptoki::context::{CInitializeArgs, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::aead::GcmParams;
use cryptoki::mechanism::rsa::{PkcsMgfType, PkcsPssParams};
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;
use openssl::hash::MessageDigest;

use super::{
    check_aead_key, failed, split_tag, unsupported, Aead, Backend, BackendError, Digest, GeneratedSigner, LibraryInfo,
    Mac, Result, Signer, Verifier,
};
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, RsaPadding, SigAlg};

/// The environment variable naming the token's PKCS#11 module.
pub const MODULE_ENV: &str = "CRYPTOPERF_PKCS11_MODULE";
/// The environment variable naming the token by its label.
pub const TOKEN_ENV: &str = "CRYPTOPERF_PKCS11_TOKEN";
/// The environment variable naming a file that holds the user PIN.
pub const PIN_FILE_ENV: &str = "CRYPTOPERF_PKCS11_PIN_FILE";
/// The environment variable holding the user PIN itself.
pub const PIN_ENV: &str = "CRYPTOPERF_PKCS11_PIN";
/// The environment variable naming, by its process id, the daemon a module talks to (e.g.
/// `p11-kit server`'s `P11_KIT_SERVER_PID`, a vendor's HSM client daemon): its CPU over each
/// window is measured beside the worker's, as the token's host CPU.
pub const DAEMON_PID_ENV: &str = "CRYPTOPERF_PKCS11_DAEMON_PID";

/// The environment variable choosing where signing keys come from: `import` (the default: the
/// fixed keys every backend signs with, imported as session objects, so the known-answer tests
/// apply) or `generate` (key pairs the token generates, as session objects, for a token that
/// refuses imported private keys — as production HSMs do).
pub const KEYS_ENV: &str = "CRYPTOPERF_PKCS11_KEYS";

/// Whether [`KEYS_ENV`] asks for keys the token generates; `Err` for a value it does not take.
fn generate_keys() -> std::result::Result<bool, String> {
    match std::env::var(KEYS_ENV).as_deref().map(str::trim) {
        Err(_) | Ok("") | Ok("import") => Ok(false),
        Ok("generate") => Ok(true),
        Ok(other) => Err(format!("{KEYS_ENV}={other}: known values are import (the default) and generate")),
    }
}

/// The daemon of [`DAEMON_PID_ENV`], or why the variable is unusable.
fn daemon() -> std::result::Result<Option<crate::measure::proctree::TreeSource>, String> {
    let Ok(text) = std::env::var(DAEMON_PID_ENV) else { return Ok(None) };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let pid: u32 = text.trim().parse().map_err(|_| format!("{DAEMON_PID_ENV}={text} is not a process id"))?;
    let source = crate::measure::proctree::TreeSource::Proc(pid);
    source.read().map_err(|e| format!("{DAEMON_PID_ENV}={pid}: {e}"))?;
    Ok(Some(source))
}

/// The PKCS#11 backend (its token is the process's, [`token`]).
pub struct Pkcs11Token;

/// The token this process uses, logged in.
struct Token {
    ctx: Pkcs11,
    slot: Slot,
    label: String,
    /// The module's and token's description for `hello` and results: "SoftHSM 2.6 (token cryptoperf)".
    description: String,
    version: String,
    mechanisms: Vec<MechanismType>,
    /// The session the user logged in through, kept open: a PKCS#11 login holds for every
    /// session of the application while one is open.
    _login: Mutex<Session>,
}

static TOKEN: OnceLock<std::result::Result<Token, String>> = OnceLock::new();

/// This process's token, opened and logged in on first use. Errors: `Failed`, in one line,
/// when no module is configured, it does not load, the token is not found or the login fails
/// (the same answer for every later call: nothing is tried twice).
fn token() -> Result<&'static Token> {
    TOKEN.get_or_init(open).as_ref().map_err(|why| BackendError::Failed(why.clone()))
}

fn open() -> std::result::Result<Token, String> {
    let module = var(MODULE_ENV).ok_or_else(|| {
        format!("no PKCS#11 module: set {MODULE_ENV} to its path (`cryptoperf setup softhsm` makes a SoftHSM2 token)")
    })?;
    let ctx = Pkcs11::new(&module).map_err(|e| format!("PKCS#11 module {module} does not load: {e}"))?;
    ctx.initialize(CInitializeArgs::OsThreads).map_err(|e| format!("PKCS#11 module {module}: C_Initialize: {e}"))?;
    let wanted = var(TOKEN_ENV);
    let mut labels = Vec::new();
    let mut found = None;
    for slot in ctx.get_slots_with_initialized_token().map_err(|e| format!("PKCS#11 module {module}: {e}"))? {
        let info = ctx.get_token_info(slot).map_err(|e| format!("PKCS#11 module {module}: {e}"))?;
        let label = info.label().trim_end().to_string();
        if found.is_none() && wanted.as_deref().is_none_or(|w| w == label) {
            found = Some((slot, label.clone(), info));
        }
        labels.push(label);
    }
    let Some((slot, label, info)) = found else {
        return Err(match wanted {
            Some(w) => format!("PKCS#11 token '{w}' not found in {module} (tokens: {})", list(&labels)),
            None => format!("PKCS#11 module {module} has no initialised token"),
        });
    };
    let pin = read_pin()?;
    let session = ctx.open_rw_session(slot).map_err(|e| format!("PKCS#11 token '{label}': C_OpenSession: {e}"))?;
    match session.login(UserType::User, Some(&pin)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
        Err(CkError::Pkcs11(RvError::PinIncorrect, _)) => {
            return Err(format!("wrong PIN for PKCS#11 token '{label}' (CKR_PIN_INCORRECT); not tried again"))
        }
        Err(CkError::Pkcs11(RvError::PinLocked, _)) => {
            return Err(format!("the user PIN of PKCS#11 token '{label}' is locked (CKR_PIN_LOCKED)"))
        }
        Err(e) => return Err(format!("PKCS#11 token '{label}': C_Login: {e}")),
    }
    let mechanisms = ctx.get_mechanism_list(slot).map_err(|e| format!("PKCS#11 token '{label}': {e}"))?;
    let lib = ctx.get_library_info().map_err(|e| format!("PKCS#11 module {module}: {e}"))?;
    let description = format!(
        "{} {} (token '{label}', {} {})",
        lib.library_description().trim_end(),
        lib.library_version(),
        info.manufacturer_id().trim_end(),
        info.model().trim_end()
    );
    let version = lib.library_version().to_string();
    Ok(Token { ctx, slot, label, description, version, mechanisms, _login: Mutex::new(session) })
}

/// The environment variable `name`, None when unset or empty.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn list(labels: &[String]) -> String {
    if labels.is_empty() {
        "none".into()
    } else {
        labels.iter().map(|l| format!("'{l}'")).collect::<Vec<_>>().join(", ")
    }
}

/// The user PIN from [`PIN_FILE_ENV`] (its first line) or [`PIN_ENV`]. Errors: a one-line
/// message naming the variable (never the PIN).
fn read_pin() -> std::result::Result<AuthPin, String> {
    if let Some(path) = var(PIN_FILE_ENV) {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read the PKCS#11 PIN file {path} ({PIN_FILE_ENV}): {e}"))?;
        let pin = text.lines().next().unwrap_or("").to_string();
        if pin.is_empty() {
            return Err(format!("the PKCS#11 PIN file {path} ({PIN_FILE_ENV}) is empty"));
        }
        return Ok(AuthPin::new(pin.into()));
    }
    match var(PIN_ENV) {
        Some(pin) => Ok(AuthPin::new(pin.into())),
        None => Err(format!("no PIN for the PKCS#11 token: set {PIN_FILE_ENV} (a file) or {PIN_ENV}")),
    }
}

impl Token {
    fn has(&self, mechanism: MechanismType) -> bool {
        self.mechanisms.contains(&mechanism)
    }

    /// The mechanism a signature of `alg` runs on this token, and the digest computed on the
    /// host first, if any: `alg`'s own mechanism (CKM_SHA256_RSA_PKCS, CKM_ECDSA_SHA256, …)
    /// when the token has it; for ECDSA on a token with only CKM_ECDSA (SoftHSM2), the message
    /// hashed on the host by OpenSSL and the hash signed on the token, as OpenSSL's PKCS#11
    /// engine and provider do. Errors: `Unsupported` naming the mechanism the token lacks.
    fn sig_mechanism(&self, alg: SigAlg, what: &str) -> Result<(Mechanism<'static>, Option<MessageDigest>)> {
        let mechanism = sig_mechanism(alg)?;
        let kind = mechanism.mechanism_type();
        if self.has(kind) {
            return Ok((mechanism, None));
        }
        if let (SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest }, true) = (alg, self.has(MechanismType::ECDSA)) {
            return Ok((Mechanism::Ecdsa, Some(host_digest(digest))));
        }
        self.require(kind, what).map(|()| unreachable!("the token lacks {kind}"))
    }

    /// A new session with its own copy of nothing yet. Errors: `Failed`.
    fn session(&self) -> Result<Session> {
        self.ctx.open_rw_session(self.slot).map_err(|e| failed(format!("PKCS#11 token '{}': C_OpenSession: {e}", self.label)))
    }

    /// A new session holding one session object made from `template` (a key), and its handle.
    /// Errors: `Failed`.
    fn session_with(&self, template: &[Attribute]) -> Result<(Session, ObjectHandle)> {
        let session = self.session()?;
        let key = session.create_object(template).map_err(|e| call("C_CreateObject", e))?;
        Ok((session, key))
    }

    /// `Unsupported` unless the token offers `mechanism` (`what`: the operation, for the text).
    fn require(&self, mechanism: MechanismType, what: &str) -> Result<()> {
        if self.has(mechanism) {
            return Ok(());
        }
        unsupported(format!("PKCS#11 token '{}' lacks {mechanism} ({what})", self.label))
    }
}

/// `Failed` with the token's words for a PKCS#11 call that failed.
fn call(what: &str, e: CkError) -> BackendError {
    BackendError::Failed(format!("PKCS#11 {what}: {e}"))
}

/// The DER `ECParameters` (a named curve's OID) of P-256 and P-384 (RFC 5480 §2.1.1.1).
const P256_OID: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384_OID: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];

fn digest_mechanism(alg: DigestAlg) -> Option<Mechanism<'static>> {
    Some(match alg {
        DigestAlg::Sha1 => Mechanism::Sha1,
        DigestAlg::Sha256 => Mechanism::Sha256,
        DigestAlg::Sha384 => Mechanism::Sha384,
        DigestAlg::Sha512 => Mechanism::Sha512,
        DigestAlg::Sha3_256 => return None,
    })
}

fn hmac_mechanism(alg: DigestAlg) -> Option<Mechanism<'static>> {
    Some(match alg {
        DigestAlg::Sha1 => Mechanism::Sha1Hmac,
        DigestAlg::Sha256 => Mechanism::Sha256Hmac,
        DigestAlg::Sha384 => Mechanism::Sha384Hmac,
        DigestAlg::Sha512 => Mechanism::Sha512Hmac,
        DigestAlg::Sha3_256 => return None,
    })
}

/// The signature mechanism of `alg` (its type, for the token's list: `mechanism_type()`).
fn sig_mechanism(alg: SigAlg) -> Result<Mechanism<'static>> {
    let pss = |hash_alg, mgf, len: u64| PkcsPssParams { hash_alg, mgf, s_len: len.into() };
    Ok(match alg {
        SigAlg::Rsa { digest, padding: RsaPadding::Pkcs1, .. } => match digest {
            DigestAlg::Sha1 => Mechanism::Sha1RsaPkcs,
            DigestAlg::Sha256 => Mechanism::Sha256RsaPkcs,
            DigestAlg::Sha384 => Mechanism::Sha384RsaPkcs,
            DigestAlg::Sha512 => Mechanism::Sha512RsaPkcs,
            DigestAlg::Sha3_256 => return unsupported("the PKCS#11 binding (cryptoki 0.10) has no RSA PKCS#1 v1.5 mechanism with SHA3-256"),
        },
        SigAlg::Rsa { digest, padding: RsaPadding::Pss, .. } => match digest {
            DigestAlg::Sha1 => Mechanism::Sha1RsaPkcsPss(pss(MechanismType::SHA1, PkcsMgfType::MGF1_SHA1, 20)),
            DigestAlg::Sha256 => Mechanism::Sha256RsaPkcsPss(pss(MechanismType::SHA256, PkcsMgfType::MGF1_SHA256, 32)),
            DigestAlg::Sha384 => Mechanism::Sha384RsaPkcsPss(pss(MechanismType::SHA384, PkcsMgfType::MGF1_SHA384, 48)),
            DigestAlg::Sha512 => Mechanism::Sha512RsaPkcsPss(pss(MechanismType::SHA512, PkcsMgfType::MGF1_SHA512, 64)),
            DigestAlg::Sha3_256 => return unsupported("the PKCS#11 binding (cryptoki 0.10) has no RSA-PSS mechanism with SHA3-256"),
        },
        SigAlg::EcdsaP256 { digest } | SigAlg::EcdsaP384 { digest } => match digest {
            DigestAlg::Sha1 => Mechanism::EcdsaSha1,
            DigestAlg::Sha256 => Mechanism::EcdsaSha256,
            DigestAlg::Sha384 => Mechanism::EcdsaSha384,
            DigestAlg::Sha512 => Mechanism::EcdsaSha512,
            DigestAlg::Sha3_256 => return unsupported("the PKCS#11 binding (cryptoki 0.10) has no ECDSA mechanism with SHA3-256"),
        },
        SigAlg::Ed25519 | SigAlg::MlDsa(_) => return unsupported(format!("the pkcs11 backend does not sign {alg:?}")),
    })
}

/// OpenSSL's digest for a signature hashed on the host (SHA3-256 never gets here: no PKCS#11
/// signature mechanism has it, [`sig_mechanism`]).
fn host_digest(alg: DigestAlg) -> MessageDigest {
    match alg {
        DigestAlg::Sha1 => MessageDigest::sha1(),
        DigestAlg::Sha256 => MessageDigest::sha256(),
        DigestAlg::Sha384 => MessageDigest::sha384(),
        DigestAlg::Sha512 => MessageDigest::sha512(),
        DigestAlg::Sha3_256 => MessageDigest::sha3_256(),
    }
}

/// `msg`, or its digest when the signature hashes on the host.
fn to_sign(prehash: Option<MessageDigest>, msg: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>> {
    Ok(match prehash {
        None => msg.into(),
        Some(md) => openssl::hash::hash(md, msg).map_err(failed)?.to_vec().into(),
    })
}

fn ec_params(alg: SigAlg) -> Option<(&'static [u8], usize)> {
    match alg {
        SigAlg::EcdsaP256 { .. } => Some((P256_OID, 32)),
        SigAlg::EcdsaP384 { .. } => Some((P384_OID, 48)),
        _ => None,
    }
}

/// The attributes of `key`'s private half as a session object that signs.
fn private_template(alg: SigAlg, key: &KeyPair) -> Result<Vec<Attribute>> {
    let pkey = openssl::pkey::PKey::private_key_from_der(key.private_pkcs8).map_err(failed)?;
    let mut t = vec![
        Attribute::Class(ObjectClass::PRIVATE_KEY),
        Attribute::Token(false),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Sign(true),
    ];
    if let SigAlg::Rsa { bits, .. } = alg {
        let rsa = pkey.rsa().map_err(failed)?;
        super::check_rsa_bits(rsa.size() as usize * 8, bits)?;
        let part = |n: Option<&openssl::bn::BigNumRef>| n.map(|n| n.to_vec()).ok_or_else(|| failed("RSA key lacks its CRT parts"));
        t.extend([
            Attribute::KeyType(KeyType::RSA),
            Attribute::Modulus(rsa.n().to_vec()),
            Attribute::PublicExponent(rsa.e().to_vec()),
            Attribute::PrivateExponent(rsa.d().to_vec()),
            Attribute::Prime1(part(rsa.p())?),
            Attribute::Prime2(part(rsa.q())?),
            Attribute::Exponent1(part(rsa.dmp1())?),
            Attribute::Exponent2(part(rsa.dmq1())?),
            Attribute::Coefficient(part(rsa.iqmp())?),
        ]);
    } else if let Some((oid, len)) = ec_params(alg) {
        let ec = pkey.ec_key().map_err(failed)?;
        t.extend([
            Attribute::KeyType(KeyType::EC),
            Attribute::EcParams(oid.to_vec()),
            Attribute::Value(ec.private_key().to_vec_padded(len as i32).map_err(failed)?),
        ]);
    }
    Ok(t)
}

/// The public half of a key pair the token generated, encoded as [`KeyPair::public`].
fn generated_public(session: &Session, key: ObjectHandle, alg: SigAlg) -> Result<Vec<u8>> {
    use cryptoki::object::AttributeType;
    let wanted: &[AttributeType] = match alg {
        SigAlg::Rsa { .. } => &[AttributeType::Modulus, AttributeType::PublicExponent],
        _ => &[AttributeType::EcPoint],
    };
    let attrs = session.get_attributes(key, wanted).map_err(|e| call("C_GetAttributeValue", e))?;
    let (mut n, mut e, mut point) = (None, None, None);
    for a in attrs {
        match a {
            Attribute::Modulus(v) => n = Some(v),
            Attribute::PublicExponent(v) => e = Some(v),
            Attribute::EcPoint(v) => point = Some(v),
            _ => {}
        }
    }
    match (n, e, point) {
        (Some(n), Some(e), _) => {
            let (n, e) = (openssl::bn::BigNum::from_slice(&n).map_err(failed)?, openssl::bn::BigNum::from_slice(&e).map_err(failed)?);
            openssl::rsa::Rsa::from_public_components(n, e).and_then(|r| r.public_key_to_der_pkcs1()).map_err(failed)
        }
        // CKA_EC_POINT: the DER OCTET STRING holding the point (PKCS#11 3.0 §6.3.3).
        (_, _, Some(der)) => match der.as_slice() {
            [0x04, len, rest @ ..] if *len as usize == rest.len() => Ok(rest.to_vec()),
            _ => Err(failed("the token's CKA_EC_POINT is not a short DER OCTET STRING")),
        },
        _ => Err(failed("the token gave no public key for the key pair it generated")),
    }
}

/// The attributes of a public key (encoded as [`KeyPair::public`]) as a session object that verifies.
fn public_template(alg: SigAlg, public: &[u8]) -> Result<Vec<Attribute>> {
    let mut t = vec![Attribute::Class(ObjectClass::PUBLIC_KEY), Attribute::Token(false), Attribute::Verify(true)];
    if let SigAlg::Rsa { .. } = alg {
        let rsa = openssl::rsa::Rsa::public_key_from_der_pkcs1(public).map_err(failed)?;
        t.extend([
            Attribute::KeyType(KeyType::RSA),
            Attribute::Modulus(rsa.n().to_vec()),
            Attribute::PublicExponent(rsa.e().to_vec()),
        ]);
    } else if let Some((oid, _)) = ec_params(alg) {
        // CKA_EC_POINT is the DER OCTET STRING holding the uncompressed point (PKCS#11 3.0 §6.3.3).
        let mut point = vec![0x04, public.len() as u8];
        point.extend_from_slice(public);
        t.extend([Attribute::KeyType(KeyType::EC), Attribute::EcParams(oid.to_vec()), Attribute::EcPoint(point)]);
    }
    Ok(t)
}

/// A session with one key imported into it, and the mechanism it runs.
struct Keyed {
    session: Session,
    key: ObjectHandle,
    mechanism: Mechanism<'static>,
}

// SAFETY: `Session` is `Send` and `ObjectHandle` a plain number; `Mechanism` is not `Send` only
// because some of its variants hold pointers to their parameters, and with the `'static`
// lifetime those point to static data or data leaked for good, which any thread may read. A
// `Keyed` is used through `&mut self` (or by one owner at a time), as a PKCS#11 session must be.
unsafe impl Send for Keyed {}

impl Keyed {
    fn new(token: &Token, template: &[Attribute], mechanism: Mechanism<'static>) -> Result<Keyed> {
        let (session, key) = token.session_with(template)?;
        Ok(Keyed { session, key, mechanism })
    }
}

/// A signature key in its session, with what the host adds around the token's call.
struct SigKey {
    keyed: Keyed,
    /// For ECDSA, the scalar length: the token's raw r ‖ s is converted from and to DER.
    ec_len: Option<usize>,
    /// The digest computed on the host before the token signs or verifies (`Token::sig_mechanism`).
    prehash: Option<MessageDigest>,
}

impl SigKey {
    fn new(keyed: Keyed, alg: SigAlg, prehash: Option<MessageDigest>) -> SigKey {
        SigKey { keyed, ec_len: ec_params(alg).map(|(_, len)| len), prehash }
    }
}

struct TokenSigner(SigKey);

impl Signer for TokenSigner {
    fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        let SigKey { keyed: k, ec_len, prehash } = &self.0;
        let data = to_sign(*prehash, msg)?;
        let sig = k.session.sign(&k.mechanism, k.key, &data).map_err(|e| call("C_Sign", e))?;
        match ec_len {
            None => Ok(sig),
            Some(len) => ecdsa_der(&sig, *len),
        }
    }
}

/// A PKCS#11 ECDSA signature (r ‖ s, each `len` bytes) as DER `Ecdsa-Sig-Value`.
fn ecdsa_der(raw: &[u8], len: usize) -> Result<Vec<u8>> {
    if raw.len() != 2 * len {
        return Err(failed(format!("the token's ECDSA signature has {} bytes, expected {}", raw.len(), 2 * len)));
    }
    let r = openssl::bn::BigNum::from_slice(&raw[..len]).map_err(failed)?;
    let s = openssl::bn::BigNum::from_slice(&raw[len..]).map_err(failed)?;
    openssl::ecdsa::EcdsaSig::from_private_components(r, s).and_then(|sig| sig.to_der()).map_err(failed)
}

/// DER `Ecdsa-Sig-Value` as the r ‖ s PKCS#11 verifies (`None` for a malformed signature).
fn ecdsa_raw(der: &[u8], len: usize) -> Option<Vec<u8>> {
    let sig = openssl::ecdsa::EcdsaSig::from_der(der).ok()?;
    let mut out = sig.r().to_vec_padded(len as i32).ok()?;
    out.extend(sig.s().to_vec_padded(len as i32).ok()?);
    Some(out)
}

struct TokenVerifier(SigKey);

impl Verifier for TokenVerifier {
    fn verify(&mut self, msg: &[u8], sig: &[u8]) -> Result<bool> {
        let SigKey { keyed: k, ec_len, prehash } = &self.0;
        let raw;
        let sig = match ec_len {
            None => sig,
            Some(len) => match ecdsa_raw(sig, *len) {
                Some(r) => {
                    raw = r;
                    &raw
                }
                None => return Ok(false),
            },
        };
        let data = to_sign(*prehash, msg)?;
        match k.session.verify(&k.mechanism, k.key, &data, sig) {
            Ok(()) => Ok(true),
            Err(CkError::Pkcs11(RvError::SignatureInvalid | RvError::SignatureLenRange, _)) => Ok(false),
            Err(e) => Err(call("C_Verify", e)),
        }
    }
}

struct TokenDigest {
    session: Session,
    mechanism: Mechanism<'static>,
}

impl Digest for TokenDigest {
    fn digest(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        *out = self.session.digest(&self.mechanism, data).map_err(|e| call("C_Digest", e))?;
        Ok(())
    }
}

struct TokenMac(Keyed);

impl Mac for TokenMac {
    fn mac(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let k = &self.0;
        *out = k.session.sign(&k.mechanism, k.key, data).map_err(|e| call("C_Sign (HMAC)", e))?;
        Ok(())
    }
}

struct TokenGcm {
    session: Session,
    key: ObjectHandle,
}

impl Aead for TokenGcm {
    fn seal(&mut self, nonce: &[u8; 12], aad: &[u8], plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let mut iv = *nonce;
        let params = GcmParams::new(&mut iv, aad, 128.into()).map_err(failed)?;
        *out = self.session.encrypt(&Mechanism::AesGcm(params), self.key, plaintext).map_err(|e| call("C_Encrypt", e))?;
        Ok(())
    }
    fn open(&mut self, nonce: &[u8; 12], aad: &[u8], sealed: &[u8], out: &mut Vec<u8>) -> Result<()> {
        split_tag(sealed)?;
        let mut iv = *nonce;
        let params = GcmParams::new(&mut iv, aad, 128.into()).map_err(failed)?;
        *out = self.session.decrypt(&Mechanism::AesGcm(params), self.key, sealed).map_err(|e| call("C_Decrypt", e))?;
        Ok(())
    }
}

impl Backend for Pkcs11Token {
    /// The module and token when this process has opened it; before that (a `hello`, which
    /// must not log in) the module's path alone.
    fn info(&self) -> LibraryInfo {
        let (library, library_version) = match TOKEN.get() {
            Some(Ok(t)) => (format!("PKCS#11: {}", t.description), t.version.clone()),
            _ => match var(MODULE_ENV) {
                Some(module) => (format!("PKCS#11 module {module}"), "?".into()),
                None => (format!("PKCS#11 (no module: {MODULE_ENV} is not set)"), "?".into()),
            },
        };
        LibraryInfo { backend: "pkcs11", library, library_version, fips: false, fips_provider: None }
    }

    fn open(&self) -> Result<()> {
        token()?;
        generate_keys().map_err(BackendError::Failed)?;
        daemon().map(|_| ()).map_err(BackendError::Failed)
    }

    fn generates_signing_keys(&self) -> Option<String> {
        matches!(generate_keys(), Ok(true)).then(|| {
            format!("{KEYS_ENV}=generate: the token generates its signing keys, so no known answer exists; its \
                     signatures are checked by the software libraries with the public key it gives")
        })
    }

    /// A key pair generated on the token as session objects (the private half sensitive, never
    /// leaving it), and its public key read back (RSA: PKCS#1 DER; ECDSA: the uncompressed point).
    fn sig_keygen(&self, alg: SigAlg, seed: Option<&[u8]>) -> Result<GeneratedSigner> {
        if seed.is_some() {
            return unsupported("a PKCS#11 token generates keys from its own random generator, not from a seed");
        }
        let t = token()?;
        let (mechanism, prehash) = t.sig_mechanism(alg, &format!("{alg:?} signing"))?;
        let (generate, mut public_template) = match (alg, ec_params(alg)) {
            (SigAlg::Rsa { bits, .. }, _) => (Mechanism::RsaPkcsKeyPairGen,
                                             vec![Attribute::ModulusBits((bits as u64).into()), Attribute::PublicExponent(vec![1, 0, 1])]),
            (_, Some((oid, _))) => (Mechanism::EccKeyPairGen, vec![Attribute::EcParams(oid.to_vec())]),
            _ => return unsupported(format!("the pkcs11 backend generates no {alg:?} key")),
        };
        t.require(generate.mechanism_type(), &format!("{alg:?} key generation"))?;
        public_template.extend([Attribute::Token(false), Attribute::Verify(true)]);
        let private_template = [Attribute::Token(false), Attribute::Private(true), Attribute::Sensitive(true), Attribute::Sign(true)];
        let session = t.session()?;
        let (public_key, private_key) =
            session.generate_key_pair(&generate, &public_template, &private_template).map_err(|e| call("C_GenerateKeyPair", e))?;
        let public = generated_public(&session, public_key, alg)?;
        let keyed = Keyed { session, key: private_key, mechanism };
        Ok(GeneratedSigner { signer: Box::new(TokenSigner(SigKey::new(keyed, alg, prehash))), public })
    }

    fn companion(&self) -> Option<crate::measure::proctree::TreeSource> {
        daemon().ok().flatten()
    }

    fn digest(&self, alg: DigestAlg) -> Result<Box<dyn Digest>> {
        let t = token()?;
        let Some(mechanism) = digest_mechanism(alg) else {
            return unsupported(format!("the PKCS#11 binding (cryptoki 0.10) has no {} mechanism", alg.name()));
        };
        t.require(mechanism.mechanism_type(), alg.name())?;
        Ok(Box::new(TokenDigest { session: t.session()?, mechanism }))
    }

    fn hmac(&self, alg: DigestAlg, key: &[u8]) -> Result<Box<dyn Mac>> {
        let t = token()?;
        let Some(mechanism) = hmac_mechanism(alg) else {
            return unsupported(format!("the PKCS#11 binding (cryptoki 0.10) has no HMAC-{} mechanism", alg.name()));
        };
        let kind = mechanism.mechanism_type();
        t.require(kind, &format!("HMAC-{}", alg.name()))?;
        let info = t.ctx.get_mechanism_info(t.slot, kind).map_err(|e| call("C_GetMechanismInfo", e))?;
        if key.len() < info.min_key_size() {
            return unsupported(format!(
                "PKCS#11 token '{}' takes HMAC-{} keys of {} bytes or more, not {}",
                t.label,
                alg.name(),
                info.min_key_size(),
                key.len()
            ));
        }
        let template = [
            Attribute::Class(ObjectClass::SECRET_KEY),
            Attribute::KeyType(KeyType::GENERIC_SECRET),
            Attribute::Token(false),
            Attribute::Sign(true),
            Attribute::Value(key.to_vec()),
        ];
        Ok(Box::new(TokenMac(Keyed::new(t, &template, mechanism)?)))
    }

    fn aead(&self, alg: AeadAlg, key: &[u8]) -> Result<Box<dyn Aead>> {
        let t = token()?;
        if alg == AeadAlg::ChaCha20Poly1305 {
            return unsupported(format!("the pkcs11 backend runs AES-GCM only, not {}", alg.name()));
        }
        t.require(MechanismType::AES_GCM, alg.name())?;
        check_aead_key(alg, key)?;
        let template = [
            Attribute::Class(ObjectClass::SECRET_KEY),
            Attribute::KeyType(KeyType::AES),
            Attribute::Token(false),
            Attribute::Encrypt(true),
            Attribute::Decrypt(true),
            Attribute::Value(key.to_vec()),
        ];
        let (session, key) = t.session_with(&template)?;
        Ok(Box::new(TokenGcm { session, key }))
    }

    fn signer(&self, alg: SigAlg, key: &KeyPair) -> Result<Box<dyn Signer>> {
        let t = token()?;
        let (mechanism, prehash) = t.sig_mechanism(alg, &format!("{alg:?} signing"))?;
        let keyed = Keyed::new(t, &private_template(alg, key)?, mechanism)?;
        Ok(Box::new(TokenSigner(SigKey::new(keyed, alg, prehash))))
    }

    fn verifier(&self, alg: SigAlg, public: &[u8]) -> Result<Box<dyn Verifier>> {
        let t = token()?;
        let (mechanism, prehash) = t.sig_mechanism(alg, &format!("{alg:?} verification"))?;
        let keyed = Keyed::new(t, &public_template(alg, public)?, mechanism)?;
        Ok(Box::new(TokenVerifier(SigKey::new(keyed, alg, prehash))))
    }

    fn owned(&self) -> Option<Box<dyn Backend>> {
        Some(Box::new(Pkcs11Token))
    }
}

#[cfg(test)]
mod tests;
