//! What a TLS transaction is asked to negotiate ([`TlsParams`]: stack, version, certificate
//! kind, group, suite) and what it did ([`Negotiated`]), with the names each takes.

#![warn(missing_docs)]

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

    /// The backends a protocol stack is built on, as the workloads' `stack` parameter names
    /// them: `aws-lc`, `ring`, `openssl`.
    pub fn backend_names() -> Vec<String> {
        Stack::ALL.iter().map(|s| s.backend().to_string()).collect()
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
