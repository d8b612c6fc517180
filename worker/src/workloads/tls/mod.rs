//! TLS handshakes through complete TLS stacks: rustls 0.23 over its aws-lc-rs provider and over
//! its ring provider ([`rustls_stack`]), and OpenSSL through the `openssl` crate
//! ([`openssl_stack`]).
//!
//! Everything a handshake needs is made here, in memory: the server [`Identity`] (a CA and a leaf
//! signed by it, never written to disk), the client and server configurations ([`client`],
//! [`server`]), and a non-blocking in-memory byte pipe ([`memory_pair`]) so one thread can run
//! both sides of a connection ([`transaction_in_memory`]) and time each side's CPU separately.
//! Over TCP, [`transaction_client`] and [`transaction_server`] run the two halves of the same
//! transaction in different threads or processes.
//!
//! The client offers exactly one version, one cipher suite and one key-exchange group (those of
//! [`TlsParams`]), so what is negotiated is forced; [`Negotiated::mismatch`] says when a
//! handshake nevertheless ended with something else. A combination a library lacks is
//! [`BackendError::Unsupported`] with the reason, decided when the configuration is built,
//! never a silent fallback.

#![warn(missing_docs)]

pub mod openssl_stack;
pub mod rustls_stack;

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::backends::BackendError;

/// Defines a parameter enum with its names (`ALL`, `NAMES`, `parse`, `name`).
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }
        // Every enum gets the same API; not every enum uses all of it.
        #[allow(dead_code)]
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The names [`Self::parse`] accepts, in the order of [`Self::ALL`].
            pub const NAMES: &'static [&'static str] = &[$($text),+];
            /// The value called `name` (exactly one of [`Self::NAMES`]), or `None`.
            pub fn parse(name: &str) -> Option<Self> {
                match name { $($text => Some($name::$variant),)+ _ => None }
            }
            /// This value's name, as [`Self::parse`] accepts it.
            pub fn name(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }
    };
}

named_enum! {
    /// The one TLS version a client offers and a server accepts.
    TlsVersion {
        /// TLS 1.2 (RFC 5246), ECDHE suites only.
        Tls12 => "1.2",
        /// TLS 1.3 (RFC 8446).
        Tls13 => "1.3",
    }
}
named_enum! {
    /// The server certificate's key (the CA that signs it has a key of the same kind).
    CertKind {
        /// RSA, 2048-bit modulus (certificates signed with SHA-256).
        Rsa2048 => "rsa2048",
        /// RSA, 4096-bit modulus (certificates signed with SHA-256).
        Rsa4096 => "rsa4096",
        /// ECDSA on P-256 (certificates signed with SHA-256).
        EcdsaP256 => "ecdsa-p256",
        /// Ed25519.
        Ed25519 => "ed25519",
    }
}
named_enum! {
    /// The one key-exchange group a client offers (X25519MLKEM768: TLS 1.3 only).
    Group {
        /// X25519 ECDH (RFC 7748).
        X25519 => "x25519",
        /// ECDH on P-256 (secp256r1).
        P256 => "p256",
        /// The hybrid of ML-KEM-768 and X25519 (draft-ietf-tls-ecdhe-mlkem; TLS 1.3 only).
        X25519MlKem768 => "x25519mlkem768",
    }
}
named_enum! {
    /// The record protection; with TLS 1.2 the suite is the ECDHE suite of that AEAD whose
    /// signature half matches the certificate (ECDHE-RSA for RSA, ECDHE-ECDSA for ECDSA and
    /// Ed25519).
    Suite {
        /// AES-128-GCM (with SHA-256).
        Aes128Gcm => "aes-128-gcm",
        /// AES-256-GCM (with SHA-384).
        Aes256Gcm => "aes-256-gcm",
        /// ChaCha20-Poly1305 (with SHA-256).
        Chacha20Poly1305 => "chacha20-poly1305",
    }
}
named_enum! {
    /// A TLS implementation: rustls over aws-lc-rs, rustls over ring, or OpenSSL.
    Stack {
        /// rustls with its aws-lc-rs provider (the worker's `aws-lc` backend).
        RustlsAwsLc => "rustls-aws-lc",
        /// rustls with its ring provider (the worker's `ring` backend).
        RustlsRing => "rustls-ring",
        /// OpenSSL's libssl (the worker's `openssl` backend).
        OpenSsl => "openssl",
    }
}

impl Stack {
    /// The stack behind the worker's backend `backend` (`"aws-lc"`: rustls with aws-lc-rs,
    /// `"ring"`: rustls with ring, `"openssl"`: OpenSSL), or `None` for a backend without one.
    pub fn for_backend(backend: &str) -> Option<Stack> {
        match backend {
            "aws-lc" => Some(Stack::RustlsAwsLc),
            "ring" => Some(Stack::RustlsRing),
            "openssl" => Some(Stack::OpenSsl),
            _ => None,
        }
    }

    /// The worker backend this stack belongs to (inverse of [`Stack::for_backend`]).
    pub fn backend(&self) -> &'static str {
        match self {
            Stack::RustlsAwsLc => "aws-lc",
            Stack::RustlsRing => "ring",
            Stack::OpenSsl => "openssl",
        }
    }
}

impl TlsVersion {
    /// The version as libraries print it: `"TLSv1.2"` or `"TLSv1.3"`.
    pub fn wire_name(&self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLSv1.2",
            TlsVersion::Tls13 => "TLSv1.3",
        }
    }
}

impl Group {
    /// The IANA TLS NamedGroup code point.
    pub fn code(&self) -> u16 {
        match self {
            Group::X25519 => 0x001d,
            Group::P256 => 0x0017,
            Group::X25519MlKem768 => 0x11ec,
        }
    }
}

/// One handshake configuration: what the client offers (only this) and the server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlsParams {
    /// The only protocol version either side accepts.
    pub version: TlsVersion,
    /// The server certificate's key kind (the [`Identity`] must be of this kind).
    pub cert: CertKind,
    /// The only key-exchange group offered (and, on the server, accepted).
    pub group: Group,
    /// The only AEAD offered; the exact suite follows from the version and certificate.
    pub suite: Suite,
    /// Resume sessions: the client keeps a session cache across connections (TLS 1.3 PSK
    /// tickets, TLS 1.2 session tickets) and the server issues tickets. Without it neither side
    /// caches and the server issues no tickets.
    pub resume: bool,
    /// Largest plaintext fragment each side sends, in bytes (512..=16384); `None` is the
    /// library default (16384).
    pub record_bytes: Option<usize>,
    /// Client only: a second group offered after `group`, as real clients offer several, so
    /// that a server without `group` can negotiate this one instead (which [`Negotiated::mismatch`]
    /// then reports, since `group` is what was asked for). `None`: `group` alone.
    pub fallback_group: Option<Group>,
}

impl TlsParams {
    /// The cipher suite these parameters force.
    pub(crate) fn cipher_suite(&self) -> SuiteId {
        suite_id(self.version, self.suite, self.cert)
    }

    /// Checks shared by every stack: `Unsupported` for combinations no TLS library can do.
    pub(crate) fn check_common(&self) -> Result<(), BackendError> {
        if self.group == Group::X25519MlKem768 && self.version == TlsVersion::Tls12 {
            return Err(BackendError::Unsupported(
                "X25519MLKEM768 is a TLS 1.3-only group (draft-ietf-tls-ecdhe-mlkem)".into(),
            ));
        }
        if let Some(n) = self.record_bytes {
            if !(512..=16384).contains(&n) {
                return Err(BackendError::Unsupported(format!(
                    "record size {n} bytes is outside 512..=16384 (OpenSSL's max_send_fragment range)"
                )));
            }
        }
        Ok(())
    }
}

/// A cipher suite: its IANA code point and name, and OpenSSL's name for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SuiteId {
    pub code: u16,
    pub iana: &'static str,
    pub openssl: &'static str,
}

/// The suite `version` uses for `suite` with a `cert` certificate.
pub(crate) fn suite_id(version: TlsVersion, suite: Suite, cert: CertKind) -> SuiteId {
    let rsa = matches!(cert, CertKind::Rsa2048 | CertKind::Rsa4096);
    let (code, iana, openssl) = match (version, suite, rsa) {
        (TlsVersion::Tls13, Suite::Aes128Gcm, _) => (0x1301, "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
        (TlsVersion::Tls13, Suite::Aes256Gcm, _) => (0x1302, "TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"),
        (TlsVersion::Tls13, Suite::Chacha20Poly1305, _) => {
            (0x1303, "TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256")
        }
        (TlsVersion::Tls12, Suite::Aes128Gcm, true) => {
            (0xc02f, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256")
        }
        (TlsVersion::Tls12, Suite::Aes256Gcm, true) => {
            (0xc030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384")
        }
        (TlsVersion::Tls12, Suite::Chacha20Poly1305, true) => {
            (0xcca8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305")
        }
        (TlsVersion::Tls12, Suite::Aes128Gcm, false) => {
            (0xc02b, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256")
        }
        (TlsVersion::Tls12, Suite::Aes256Gcm, false) => {
            (0xc02c, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384")
        }
        (TlsVersion::Tls12, Suite::Chacha20Poly1305, false) => {
            (0xcca9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305")
        }
    };
    SuiteId { code, iana, openssl }
}

/// The IANA name of cipher suite `code`, for the suites [`suite_id`] can produce; other code
/// points as `"0xXXXX"`.
pub(crate) fn suite_name(code: u16) -> String {
    for version in TlsVersion::ALL {
        for suite in Suite::ALL {
            for cert in [CertKind::Rsa2048, CertKind::EcdsaP256] {
                let id = suite_id(*version, *suite, cert);
                if id.code == code {
                    return id.iana.to_string();
                }
            }
        }
    }
    format!("0x{code:04x}")
}

/// Our name for TLS NamedGroup `code` (`x25519`, `p256`, `x25519mlkem768`), else `"0xXXXX"`.
pub(crate) fn group_name(code: u16) -> String {
    match Group::ALL.iter().find(|g| g.code() == code) {
        Some(g) => g.name().to_string(),
        None => format!("0x{code:04x}"),
    }
}

/// The IANA name (lowercase) of TLS SignatureScheme `code`, else `"0xXXXX"`.
pub(crate) fn scheme_name(code: u16) -> String {
    match code {
        0x0201 => "rsa_pkcs1_sha1",
        0x0203 => "ecdsa_sha1",
        0x0401 => "rsa_pkcs1_sha256",
        0x0501 => "rsa_pkcs1_sha384",
        0x0601 => "rsa_pkcs1_sha512",
        0x0403 => "ecdsa_secp256r1_sha256",
        0x0503 => "ecdsa_secp384r1_sha384",
        0x0603 => "ecdsa_secp521r1_sha512",
        0x0804 => "rsa_pss_rsae_sha256",
        0x0805 => "rsa_pss_rsae_sha384",
        0x0806 => "rsa_pss_rsae_sha512",
        0x0807 => "ed25519",
        0x0808 => "ed448",
        0x0809 => "rsa_pss_pss_sha256",
        0x080a => "rsa_pss_pss_sha384",
        0x080b => "rsa_pss_pss_sha512",
        _ => return format!("0x{code:04x}"),
    }
    .to_string()
}

/// Which certificate key kinds a signature scheme name can come from: `Some("rsa")`,
/// `Some("ecdsa")`, `Some("ed25519")`, or `None` for anything else.
fn scheme_key_type(scheme: &str) -> Option<&'static str> {
    if scheme.starts_with("rsa_") {
        Some("rsa")
    } else if scheme.starts_with("ecdsa_") {
        Some("ecdsa")
    } else if scheme == "ed25519" {
        Some("ed25519")
    } else {
        None
    }
}

impl CertKind {
    /// The key type of signature schemes this certificate can sign with (see
    /// [`Negotiated::mismatch`]).
    fn key_type(&self) -> &'static str {
        match self {
            CertKind::Rsa2048 | CertKind::Rsa4096 => "rsa",
            CertKind::EcdsaP256 => "ecdsa",
            CertKind::Ed25519 => "ed25519",
        }
    }
}

/// What one side of a completed handshake reports was negotiated (a part of the result).
pub use crate::result::Negotiated;

impl Negotiated {
    /// `None` when this is what `p` asked for; else one line saying what differs (e.g.
    /// "negotiated group x25519, asked for x25519mlkem768"). Checked: the version; the cipher
    /// suite; `resumed == p.resume`; the group (not for a resumed TLS 1.2 handshake, which
    /// has no key exchange); that the signature scheme's key type matches `p.cert` (not when
    /// resumed).
    pub fn mismatch(&self, p: &TlsParams) -> Option<String> {
        let mut diffs = Vec::new();
        if self.version != p.version.wire_name() {
            diffs.push(format!("negotiated version {}, asked for {}", self.version, p.version.wire_name()));
        }
        let suite = p.cipher_suite().iana;
        if self.cipher_suite != suite {
            diffs.push(format!("negotiated cipher suite {}, asked for {suite}", self.cipher_suite));
        }
        if self.resumed != p.resume {
            diffs.push(if p.resume {
                "full handshake, asked for a resumed one".to_string()
            } else {
                "resumed handshake, asked for a full one".to_string()
            });
        }
        let tls12_resumed = self.resumed && self.version == TlsVersion::Tls12.wire_name();
        if !tls12_resumed && self.group != p.group.name() {
            diffs.push(format!("negotiated group {}, asked for {}", self.group, p.group.name()));
        }
        if !self.resumed && scheme_key_type(&self.signature_scheme) != Some(p.cert.key_type()) {
            diffs.push(format!(
                "signature scheme {} does not fit a {} certificate",
                self.signature_scheme,
                p.cert.name()
            ));
        }
        if diffs.is_empty() {
            None
        } else {
            Some(diffs.join("; "))
        }
    }
}

/// Server identity generated in memory (never written to disk): a CA with a key of the same
/// kind, and a leaf it signs whose subject alternative name is DNS `localhost` (extended key
/// usage serverAuth), both valid from an hour ago for 30 days.
#[derive(Clone)]
pub struct Identity {
    /// The chain the server sends, leaf first: just the leaf (the CA is the client's trust
    /// anchor and is not sent).
    pub cert_chain_der: Vec<Vec<u8>>,
    /// The leaf's private key, PKCS#8 DER.
    pub key_pkcs8_der: Vec<u8>,
    /// The CA certificate, DER: the only certificate clients trust.
    pub ca_der: Vec<u8>,
    /// The kind of both keys.
    pub kind: CertKind,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Identity {
    /// Generate a fresh CA and leaf of `kind` with OpenSSL (RSA keys take up to a second or so
    /// for 4096 bits). `Err` carries OpenSSL's error text. Nothing is read from or written to
    /// the filesystem.
    pub fn generate(kind: CertKind) -> Result<Identity, String> {
        certs::generate(kind).map_err(|e| format!("generating a {} identity: {e}", kind.name()))
    }
}

/// Keys per kind in the fixed pool ([`pool_key`]).
pub const POOL_SIZE: usize = 6;

/// PKCS #8 DER of the fixed pool's key `index` (taken modulo [`POOL_SIZE`]) of `kind`: test keys
/// compiled into the worker (how they were made, and why a pool: `tls/keys/README.md`), so that
/// thousands of identities of a job need no key generation (about a second per RSA-4096 key).
pub fn pool_key(kind: CertKind, index: usize) -> &'static [u8] {
    macro_rules! pool {
        ($prefix:literal) => {
            [
                include_bytes!(concat!("keys/", $prefix, "-0.pk8.der")).as_slice(),
                include_bytes!(concat!("keys/", $prefix, "-1.pk8.der")).as_slice(),
                include_bytes!(concat!("keys/", $prefix, "-2.pk8.der")).as_slice(),
                include_bytes!(concat!("keys/", $prefix, "-3.pk8.der")).as_slice(),
                include_bytes!(concat!("keys/", $prefix, "-4.pk8.der")).as_slice(),
                include_bytes!(concat!("keys/", $prefix, "-5.pk8.der")).as_slice(),
            ]
        };
    }
    static RSA2048: [&[u8]; POOL_SIZE] = pool!("rsa2048");
    static RSA4096: [&[u8]; POOL_SIZE] = pool!("rsa4096");
    static ECDSA_P256: [&[u8]; POOL_SIZE] = pool!("ecdsa-p256");
    static ED25519: [&[u8]; POOL_SIZE] = pool!("ed25519");
    let table = match kind {
        CertKind::Rsa2048 => &RSA2048,
        CertKind::Rsa4096 => &RSA4096,
        CertKind::EcdsaP256 => &ECDSA_P256,
        CertKind::Ed25519 => &ED25519,
    };
    table[index % POOL_SIZE]
}

/// What a leaf certificate is for (its extended key usage).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// A TLS server (serverAuth); the name is its DNS subject alternative name.
    Server,
    /// A TLS client presenting a certificate in mutual TLS (clientAuth).
    Client,
}

/// A certificate authority made for one job: a key of the fixed pool ([`pool_key`]) and a
/// self-signed certificate made now, in memory. It issues the leaves of the job's identities
/// (each with its own name and serial over a key of the pool), and any process of the worker can
/// take it up from the certificate alone ([`Authority::from_der`]), since the key is the pool's.
pub struct Authority {
    kind: CertKind,
    key: openssl::pkey::PKey<openssl::pkey::Private>,
    cert: openssl::x509::X509,
}

impl Authority {
    /// A fresh CA certificate named `cn` over pool key `key_index` of `kind`. `Err`: OpenSSL's
    /// error text, in one line.
    pub fn new(kind: CertKind, key_index: usize, cn: &str) -> Result<Authority, String> {
        let key = parse_pool_key(kind, key_index)?;
        let cert = certs::cert(kind, &key, certs::Subject::Ca { cn })
            .map_err(|e| format!("making the {} CA certificate: {e}", kind.name()))?;
        Ok(Authority { kind, key, cert })
    }

    /// The CA of certificate `ca_der` (DER), whose key is pool key `key_index` of `kind`.
    /// `Err` when the certificate does not parse or is not that key's.
    pub fn from_der(kind: CertKind, key_index: usize, ca_der: &[u8]) -> Result<Authority, String> {
        let key = parse_pool_key(kind, key_index)?;
        let cert = openssl::x509::X509::from_der(ca_der).map_err(|e| format!("the CA certificate does not parse: {e}"))?;
        let theirs = cert.public_key().map_err(|e| format!("the CA certificate's key: {e}"))?;
        if !key.public_eq(&theirs) {
            return Err(format!("the CA certificate is not over pool key {key_index} of {}", kind.name()));
        }
        Ok(Authority { kind, key, cert })
    }

    /// The CA certificate, DER.
    pub fn der(&self) -> Vec<u8> {
        self.cert.to_der().unwrap_or_default()
    }

    /// A leaf certificate (DER) named `cn` for `usage`, over pool key `key_index` of the CA's
    /// kind, signed by this CA (SHA-256; Ed25519 intrinsically). `Err`: one line.
    pub fn issue(&self, key_index: usize, cn: &str, usage: Usage) -> Result<Vec<u8>, String> {
        let key = parse_pool_key(self.kind, key_index)?;
        let subject = certs::Subject::Leaf { cn, issuer: &self.cert, issuer_key: &self.key, usage };
        certs::cert(self.kind, &key, subject)
            .and_then(|c| c.to_der())
            .map_err(|e| format!("issuing the certificate of {cn}: {e}"))
    }

    /// The identity presenting `leaf_der` (issued by this CA over pool key `key_index`): its
    /// chain (the leaf), the pool key, and this CA as the one trust anchor.
    pub fn identity(&self, leaf_der: Vec<u8>, key_index: usize) -> Identity {
        Identity {
            cert_chain_der: vec![leaf_der],
            key_pkcs8_der: pool_key(self.kind, key_index).to_vec(),
            ca_der: self.der(),
            kind: self.kind,
        }
    }
}

/// Pool key `index` of `kind`, parsed by OpenSSL.
fn parse_pool_key(kind: CertKind, index: usize) -> Result<openssl::pkey::PKey<openssl::pkey::Private>, String> {
    openssl::pkey::PKey::private_key_from_pkcs8(pool_key(kind, index))
        .map_err(|e| format!("pool key {index} of {} does not parse: {e}", kind.name()))
}

mod certs {
    //! Certificate generation with OpenSSL, in memory only.
    use super::{CertKind, Identity, Usage};
    use openssl::asn1::Asn1Time;
    use openssl::bn::BigNum;
    use openssl::ec::{Asn1Flag, EcGroup, EcKey};
    use openssl::error::ErrorStack;
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::{PKey, PKeyRef, Private};
    use openssl::rsa::Rsa;
    use openssl::x509::extension::{
        AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
        SubjectKeyIdentifier,
    };
    use openssl::x509::{X509Builder, X509Name, X509NameBuilder, X509Ref, X509};

    fn key(kind: CertKind) -> Result<PKey<Private>, ErrorStack> {
        match kind {
            CertKind::Rsa2048 => PKey::from_rsa(Rsa::generate(2048)?),
            CertKind::Rsa4096 => PKey::from_rsa(Rsa::generate(4096)?),
            CertKind::EcdsaP256 => {
                let mut group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
                group.set_asn1_flag(Asn1Flag::NAMED_CURVE);
                PKey::from_ec_key(EcKey::generate(&group)?)
            }
            CertKind::Ed25519 => PKey::generate_ed25519(),
        }
    }

    fn name(cn: &str) -> Result<X509Name, ErrorStack> {
        let mut b = X509NameBuilder::new()?;
        b.append_entry_by_nid(Nid::ORGANIZATIONNAME, "cryptoperf")?;
        b.append_entry_by_nid(Nid::COMMONNAME, cn)?;
        Ok(b.build())
    }

    fn digest(kind: CertKind) -> MessageDigest {
        match kind {
            CertKind::Ed25519 => MessageDigest::null(), // EdDSA hashes internally
            _ => MessageDigest::sha256(),
        }
    }

    /// What a certificate is: a self-signed CA, or a leaf its issuer signs for a use.
    pub(super) enum Subject<'a> {
        /// A self-signed CA named `cn` (basicConstraints CA, keyCertSign).
        Ca { cn: &'a str },
        /// A leaf named `cn` (its CN and its one DNS subject alternative name), signed by the CA
        /// `issuer` with `issuer_key`, for `usage` (extended key usage serverAuth or clientAuth).
        Leaf { cn: &'a str, issuer: &'a X509Ref, issuer_key: &'a PKeyRef<Private>, usage: Usage },
    }

    /// A certificate for `key` (a `kind` key, as its issuer's), valid from an hour ago for 30
    /// days, with a random 16-byte serial, signed with SHA-256 (Ed25519: intrinsically).
    pub(super) fn cert(kind: CertKind, key: &PKeyRef<Private>, subject: Subject<'_>) -> Result<X509, ErrorStack> {
        let mut b = X509Builder::new()?;
        b.set_version(2)?;
        let mut serial = [0u8; 16];
        openssl::rand::rand_bytes(&mut serial)?;
        serial[0] &= 0x7f; // positive
        serial[0] |= 0x01; // and 16 bytes long
        let serial = BigNum::from_slice(&serial)?.to_asn1_integer()?;
        b.set_serial_number(&serial)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let (not_before, not_after) = (Asn1Time::from_unix(now - 3600)?, Asn1Time::from_unix(now + 30 * 86400)?);
        b.set_not_before(&not_before)?;
        b.set_not_after(&not_after)?;
        b.set_pubkey(key)?;
        match subject {
            Subject::Ca { cn } => {
                let subject = name(cn)?;
                b.set_subject_name(&subject)?;
                b.set_issuer_name(&subject)?;
                b.append_extension(BasicConstraints::new().critical().ca().build()?)?;
                b.append_extension(KeyUsage::new().critical().key_cert_sign().crl_sign().build()?)?;
                let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(None, None))?;
                b.append_extension(ski)?;
                b.sign(key, digest(kind))?;
            }
            Subject::Leaf { cn, issuer, issuer_key, usage } => {
                let subject = name(cn)?;
                b.set_subject_name(&subject)?;
                b.set_issuer_name(issuer.subject_name())?;
                b.append_extension(BasicConstraints::new().critical().build()?)?;
                b.append_extension(KeyUsage::new().critical().digital_signature().build()?)?;
                let eku = match usage {
                    Usage::Server => ExtendedKeyUsage::new().server_auth().build()?,
                    Usage::Client => ExtendedKeyUsage::new().client_auth().build()?,
                };
                b.append_extension(eku)?;
                let ctx = b.x509v3_context(Some(issuer), None);
                let san = SubjectAlternativeName::new().dns(cn).build(&ctx)?;
                let ski = SubjectKeyIdentifier::new().build(&ctx)?;
                let aki = AuthorityKeyIdentifier::new().keyid(true).build(&ctx)?;
                b.append_extension(san)?;
                b.append_extension(ski)?;
                b.append_extension(aki)?;
                b.sign(issuer_key, digest(kind))?;
            }
        }
        Ok(b.build())
    }

    pub(super) fn generate(kind: CertKind) -> Result<Identity, ErrorStack> {
        let ca_key = key(kind)?;
        let ca = cert(kind, &ca_key, Subject::Ca { cn: "cryptoperf test CA" })?;
        let leaf_key = key(kind)?;
        let leaf = cert(kind, &leaf_key, Subject::Leaf { cn: "localhost", issuer: &ca, issuer_key: &ca_key, usage: Usage::Server })?;
        Ok(Identity {
            cert_chain_der: vec![leaf.to_der()?],
            key_pkcs8_der: leaf_key.private_key_to_pkcs8()?,
            ca_der: ca.to_der()?,
            kind,
        })
    }
}

/// One side of one TLS connection over some byte stream ([`Transport`]).
///
/// Over a non-blocking in-memory transport, calls return as soon as the transport has no more
/// bytes to read ("would block"); over a blocking socket they wait for the peer.
pub trait Session: Send {
    /// Drive the handshake as far as the transport allows: `Ok(true)` complete, `Ok(false)` it
    /// needs bytes the peer has not sent yet (non-blocking transports only). `Err` is the
    /// library's error (an alert is sent to the peer where the library does so).
    fn handshake(&mut self) -> Result<bool, String>;
    /// Send `buf` as application data (all of it, flushed to the transport).
    fn write_all(&mut self, buf: &[u8]) -> Result<(), String>;
    /// Read application data into `buf`: `Ok(Some(n))` with `n > 0` bytes read; `Ok(Some(0))`
    /// the peer closed the connection cleanly (close_notify); `Ok(None)` no application data
    /// yet and the transport would block (non-blocking transports only; records processed on
    /// the way, e.g. TLS 1.3 session tickets, are consumed). `Err`: a TLS or transport error,
    /// including the peer closing without close_notify.
    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, String>;
    /// What the handshake negotiated, as this side sees it (meaningful once
    /// [`Session::handshake`] returned `Ok(true)`).
    fn negotiated(&self) -> Negotiated;
    /// The peer's end-entity certificate (DER) once the handshake presented one: a server's
    /// always, a client's in mutual TLS; `None` before or without one.
    fn peer_certificate(&self) -> Option<Vec<u8>>;
    /// Send close_notify, best effort (errors are ignored).
    fn close(&mut self);
}

/// A TLS server configuration of one stack, from which connections are accepted.
pub trait ServerStack: Send + Sync {
    /// Start the server side of a connection over `transport` (no bytes are exchanged yet; the
    /// handshake runs in [`Session::handshake`]).
    fn accept(&self, transport: Box<dyn Transport>) -> Result<Box<dyn Session>, String>;
    /// Whether this configuration runs only FIPS-approved cryptography in a FIPS module (rustls:
    /// `ServerConfig::fips()`; OpenSSL: its FIPS provider is loaded and the default).
    fn fips(&self) -> bool;
}

/// A TLS client configuration of one stack, from which connections to the server "localhost"
/// (or, with [`ClientStack::connect_to`], to a server of another name) are made.
pub trait ClientStack: Send + Sync {
    /// Start the client side of a connection over `transport` (no bytes are exchanged yet; the
    /// handshake runs in [`Session::handshake`]). With resumption on, the session offered is
    /// the newest one the stack's cache received.
    fn connect(&self, transport: Box<dyn Transport>) -> Result<Box<dyn Session>, String> {
        self.connect_to(transport, "localhost")
    }
    /// As [`ClientStack::connect`], to the server named `server_name`: the name sent in SNI and
    /// the one the server's certificate must carry (a DNS name).
    fn connect_to(&self, transport: Box<dyn Transport>, server_name: &str) -> Result<Box<dyn Session>, String>;
    /// As [`ServerStack::fips`], for the client configuration.
    fn fips(&self) -> bool;
}

/// A byte stream a TLS session runs over: a [`TcpStream`] or a [`MemStream`].
pub trait Transport: Read + Write + Send {}
impl Transport for TcpStream {}
impl Transport for MemStream {}

/// The server configuration of `stack` for `p`, presenting `id`.
///
/// `Err(BackendError::Unsupported(reason))` for a combination the library lacks (ring has no
/// ML-KEM; OpenSSL before 3.5 has no X25519MLKEM768; X25519MLKEM768 is TLS 1.3-only;
/// what rustls's FIPS provider does not approve, in the FIPS build; …); `Err(Failed)` when the
/// library rejects the configuration otherwise (e.g. the key).
pub fn server(stack: Stack, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ServerStack>, BackendError> {
    p.check_common()?;
    if id.kind != p.cert {
        return Err(BackendError::Failed(format!(
            "the identity is {}, the parameters ask for {}",
            id.kind.name(),
            p.cert.name()
        )));
    }
    match stack {
        Stack::RustlsAwsLc => rustls_stack::server(rustls_stack::Provider::AwsLc, id, p),
        Stack::RustlsRing => rustls_stack::server(rustls_stack::Provider::Ring, id, p),
        Stack::OpenSsl => openssl_stack::server(id, p),
    }
}

/// The client configuration of `stack` for `p`: it trusts `id.ca_der` only, verifies the
/// server name "localhost", and offers only `p.version`, `p.suite` and `p.group`. With
/// `p.resume` it keeps a session cache across [`ClientStack::connect`] calls.
///
/// Errors as for [`server`].
pub fn client(stack: Stack, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    p.check_common()?;
    match stack {
        Stack::RustlsAwsLc => rustls_stack::client(rustls_stack::Provider::AwsLc, id, p),
        Stack::RustlsRing => rustls_stack::client(rustls_stack::Provider::Ring, id, p),
        Stack::OpenSsl => openssl_stack::client(id, p),
    }
}

/// One server identity of a [`mutual_server`]: the DNS name a client asks for in SNI, the
/// certificate chain presented for it (leaf first, DER) and which key of the pool
/// ([`pool_key`], of the configuration's certificate kind) the leaf is over.
#[derive(Clone, Debug)]
pub struct NamedIdentity {
    /// A DNS name, e.g. `t00042.fleet.test`; the leaf's subject alternative name.
    pub name: String,
    /// The certificate chain, leaf first (DER).
    pub chain_der: Vec<Vec<u8>>,
    /// The leaf's key: index into the pool of `p.cert`'s kind.
    pub key_index: usize,
}

/// A mutual-TLS server configuration of `stack` for `p` that hosts many identities on one
/// listener: to each client it presents the identity its SNI names among `identities` (keys of
/// the pool, of kind `p.cert`), and it requires a client certificate issued by the CA
/// `client_ca_der` (DER). A client that names no identity here, sends no certificate or one the
/// CA did not issue fails the handshake. No sessions are resumed (no tickets, no cache).
///
/// Errors as for [`server`]; `Failed` for an identity whose certificate does not carry its name.
pub fn mutual_server(stack: Stack, client_ca_der: &[u8], identities: &[NamedIdentity], p: &TlsParams)
    -> Result<Arc<dyn ServerStack>, BackendError> {
    p.check_common()?;
    match stack {
        Stack::RustlsAwsLc => rustls_stack::mutual_server(rustls_stack::Provider::AwsLc, client_ca_der, identities, p),
        Stack::RustlsRing => rustls_stack::mutual_server(rustls_stack::Provider::Ring, client_ca_der, identities, p),
        Stack::OpenSsl => openssl_stack::mutual_server(client_ca_der, identities, p),
    }
}

/// A mutual-TLS client configuration of `stack` for `p`: it presents `id`'s certificate chain
/// and key when the server asks for one, trusts `id.ca_der` only, and verifies the name given to
/// [`ClientStack::connect_to`]. No sessions are resumed.
///
/// Errors as for [`client`].
pub fn mutual_client(stack: Stack, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    p.check_common()?;
    let p = TlsParams { resume: false, ..*p };
    match stack {
        Stack::RustlsAwsLc => rustls_stack::mutual_client(rustls_stack::Provider::AwsLc, id, &p),
        Stack::RustlsRing => rustls_stack::mutual_client(rustls_stack::Provider::Ring, id, &p),
        Stack::OpenSsl => openssl_stack::mutual_client(id, &p),
    }
}

/// One direction of a [`memory_pair`]: bytes and whether the writing end is gone.
#[derive(Default)]
struct Pipe {
    bytes: Mutex<VecDeque<u8>>,
    closed: AtomicBool,
}

/// One end of an in-memory, non-blocking, unbounded byte pipe pair ([`memory_pair`]).
/// Writes never block; reading an empty pipe is `io::ErrorKind::WouldBlock`, or `Ok(0)` once
/// the other end has been dropped.
pub struct MemStream {
    incoming: Arc<Pipe>,
    outgoing: Arc<Pipe>,
}

/// Two connected [`MemStream`]s: bytes written to one are read from the other.
pub fn memory_pair() -> (MemStream, MemStream) {
    let a = Arc::new(Pipe::default());
    let b = Arc::new(Pipe::default());
    (
        MemStream { incoming: a.clone(), outgoing: b.clone() },
        MemStream { incoming: b, outgoing: a },
    )
}

impl Read for MemStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut bytes = self.incoming.bytes.lock().unwrap_or_else(|e| e.into_inner());
        if bytes.is_empty() {
            return if self.incoming.closed.load(Ordering::Acquire) {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = bytes.len().min(buf.len());
        for (dst, src) in buf.iter_mut().zip(bytes.drain(..n)) {
            *dst = src;
        }
        Ok(n)
    }
}

impl Write for MemStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outgoing.bytes.lock().unwrap_or_else(|e| e.into_inner()).extend(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for MemStream {
    fn drop(&mut self) {
        self.outgoing.closed.store(true, Ordering::Release);
    }
}

/// CPU time this thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Run `f`, adding the thread CPU time it took to `acc` (nanoseconds).
fn timed<T>(acc: &mut u64, f: impl FnOnce() -> T) -> T {
    let start = thread_cpu_ns();
    let out = f();
    *acc += thread_cpu_ns().saturating_sub(start);
    out
}

/// The outcome of [`transaction_in_memory`].
#[derive(Clone, Debug)]
pub struct MemoryOutcome {
    /// What the client saw negotiated.
    pub negotiated: Negotiated,
    /// Thread CPU time of all the client's calls (connect, handshake, write, read, close), ns.
    pub client_cpu_ns: u64,
    /// Thread CPU time of all the server's calls (accept, handshake, read, write, close), ns.
    pub server_cpu_ns: u64,
}

/// Most handshake rounds (client call + server call) [`transaction_in_memory`] allows.
const MAX_ROUNDS: usize = 16;

/// One full transaction in this thread over a [`memory_pair`]: client connect and server
/// accept; both handshakes driven alternately until complete; the client writes a 1-byte
/// request, the server reads it and writes a 1-byte response, the client reads it (so a TLS 1.3
/// client also receives the session tickets sent before it); both send close_notify.
///
/// Returns what the client saw negotiated and each side's thread CPU time (summed around each
/// of its calls). `Err` says which side failed and where, with the library's error.
pub fn transaction_in_memory(client: &dyn ClientStack, server: &dyn ServerStack) -> Result<MemoryOutcome, String> {
    let (client_end, server_end) = memory_pair();
    let (mut client_ns, mut server_ns) = (0u64, 0u64);
    let mut c = timed(&mut client_ns, || client.connect(Box::new(client_end))).map_err(|e| format!("client connect: {e}"))?;
    let mut s = timed(&mut server_ns, || server.accept(Box::new(server_end))).map_err(|e| format!("server accept: {e}"))?;
    let (mut c_done, mut s_done) = (false, false);
    for _ in 0..MAX_ROUNDS {
        if !c_done {
            c_done = timed(&mut client_ns, || c.handshake()).map_err(|e| format!("client handshake: {e}"))?;
        }
        if !s_done {
            s_done = timed(&mut server_ns, || s.handshake()).map_err(|e| format!("server handshake: {e}"))?;
        }
        if c_done && s_done {
            break;
        }
    }
    if !(c_done && s_done) {
        return Err(format!(
            "handshake incomplete after {MAX_ROUNDS} rounds (client done: {c_done}, server done: {s_done})"
        ));
    }
    timed(&mut client_ns, || c.write_all(b"?")).map_err(|e| format!("client write: {e}"))?;
    let mut byte = [0u8; 1];
    match timed(&mut server_ns, || s.read(&mut byte)) {
        Ok(Some(1)) => {}
        other => return Err(format!("server read of the request: {other:?}")),
    }
    timed(&mut server_ns, || s.write_all(b"!")).map_err(|e| format!("server write: {e}"))?;
    match timed(&mut client_ns, || c.read(&mut byte)) {
        Ok(Some(1)) => {}
        other => return Err(format!("client read of the response: {other:?}")),
    }
    let negotiated = c.negotiated();
    timed(&mut client_ns, || c.close());
    timed(&mut server_ns, || s.close());
    Ok(MemoryOutcome { negotiated, client_cpu_ns: client_ns, server_cpu_ns: server_ns })
}

/// Read exactly one byte of application data over a blocking transport.
fn read_one(session: &mut dyn Session, what: &str) -> Result<(), String> {
    let mut byte = [0u8; 1];
    match session.read(&mut byte) {
        Ok(Some(1)) => Ok(()),
        Ok(Some(_)) => Err(format!("the peer closed the connection before its {what}")),
        Ok(None) => Err(format!("no {what} (would block on a blocking socket)")),
        Err(e) => Err(format!("reading the {what}: {e}")),
    }
}

/// The client side of one transaction over TCP: connect to `addr` (blocking, TCP_NODELAY),
/// handshake, write a 1-byte request, read the 1-byte response, close. Returns what the client
/// saw negotiated; `Err` says which step failed.
pub fn transaction_client(client: &dyn ClientStack, addr: SocketAddr) -> Result<Negotiated, String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let mut session = client.connect(Box::new(stream))?;
    if !session.handshake().map_err(|e| format!("client handshake: {e}"))? {
        return Err("client handshake would block on a blocking socket".into());
    }
    session.write_all(b"?").map_err(|e| format!("client write: {e}"))?;
    read_one(session.as_mut(), "response")?;
    let negotiated = session.negotiated();
    session.close();
    Ok(negotiated)
}

/// The server side of one transaction on an accepted TCP connection (set blocking and
/// TCP_NODELAY here): handshake, read the 1-byte request, write a 1-byte response, close.
/// Returns what the server saw negotiated; `Err` says which step failed.
pub fn transaction_server(server: &dyn ServerStack, stream: TcpStream) -> Result<Negotiated, String> {
    stream.set_nonblocking(false).map_err(|e| format!("blocking mode: {e}"))?;
    stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let mut session = server.accept(Box::new(stream))?;
    if !session.handshake().map_err(|e| format!("server handshake: {e}"))? {
        return Err("server handshake would block on a blocking socket".into());
    }
    read_one(session.as_mut(), "request")?;
    session.write_all(b"!").map_err(|e| format!("server write: {e}"))?;
    let negotiated = session.negotiated();
    session.close();
    Ok(negotiated)
}

#[cfg(test)]
mod tests;
