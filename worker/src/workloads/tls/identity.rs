//! The identities a handshake uses, made in memory: a server [`Identity`] (a CA and a leaf),
//! the fixed pool of keys ([`pool_key`]), and a certificate [`Authority`] issuing under a CA.

#![warn(missing_docs)]

use std::sync::Arc;

use super::backend_key::BackendKey;
use super::params::CertKind;

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
    /// Where the leaf's key signs when not in the TLS stack (from `key_pkcs8_der`): a backend
    /// of the worker holding it ([`BackendKey`], e.g. a PKCS#11 token). Only rustls takes one.
    pub signing: Option<Arc<BackendKey>>,
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
        if kind == CertKind::Ed25519 && crate::fips::mode("openssl") {
            // OpenSSL makes the lab's certificates, and in the FIPS worker it runs under its FIPS
            // provider, which has no EdDSA to make an Ed25519 key or sign with it.
            return Err("an Ed25519 identity cannot be made in the FIPS worker with OpenSSL's FIPS provider                         loaded (OpenSSL makes the certificates, and its 3.1 FIPS provider has no EdDSA)"
                .into());
        }
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
            signing: None,
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
            signing: None,
        })
    }
}
