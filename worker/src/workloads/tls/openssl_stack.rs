//! OpenSSL's TLS through the `openssl` crate (the system OpenSSL, or 3.6 with the worker's
//! `vendored-openssl` feature).
//!
//! What the crate does not bind is called directly: `SSL_get_negotiated_group` and
//! `SSL_get_{peer_,}signature_nid` (macros over `SSL_ctrl`), `SSL_get_{peer_,}signature_type_nid`
//! (declared here; openssl-sys lacks them) and `SSL_CTX_set_max_send_fragment` (a macro over
//! `SSL_CTX_ctrl`).

use std::io::Write;
use std::sync::{Arc, Mutex};

use foreign_types::ForeignTypeRef;
use libc::{c_int, c_long};
use openssl::nid::Nid;
use openssl::pkey::PKey;
use openssl::ssl::{
    ErrorCode, NameType, SniError, Ssl, SslAlert, SslContext, SslContextBuilder, SslMethod, SslOptions, SslRef,
    SslSession, SslSessionCacheMode, SslStream, SslVerifyMode, SslVersion,
};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;
use openssl_sys as ffi;

use super::{CertKind, group_name, scheme_name, ClientStack, Group, Identity, NamedIdentity, Negotiated, ServerStack, Session, Suite, TlsParams, TlsVersion, Transport};
use crate::backends::BackendError;

extern "C" {
    // include/openssl/tls1.h (OpenSSL 1.1.1 and later).
    fn SSL_get_peer_signature_type_nid(s: *const ffi::SSL, pnid: *mut c_int) -> c_int;
    fn SSL_get_signature_type_nid(s: *const ffi::SSL, pnid: *mut c_int) -> c_int;
}

// include/openssl/ssl.h
const SSL_CTRL_SET_MAX_SEND_FRAGMENT: c_int = 52;
const SSL_CTRL_GET_PEER_SIGNATURE_NID: c_int = 108;
const SSL_CTRL_GET_SIGNATURE_NID: c_int = 132;
const SSL_CTRL_GET_NEGOTIATED_GROUP: c_int = 134;
/// OpenSSL ≥ 3.5 reports a group without a NID as this bit ORed with its TLS code point.
const TLSEXT_NID_UNKNOWN: c_long = 0x100_0000;

fn failed(what: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Failed(format!("OpenSSL {what}: {e}"))
}

/// The OpenSSL version string, for reasons.
fn version_text() -> &'static str {
    openssl::version::version()
}

/// Version, group, suites and record size on a context builder; `Unsupported` when OpenSSL
/// lacks the group or suite.
fn configure(b: &mut SslContextBuilder, p: &TlsParams) -> Result<(), BackendError> {
    let v = match p.version {
        TlsVersion::Tls12 => SslVersion::TLS1_2,
        TlsVersion::Tls13 => SslVersion::TLS1_3,
    };
    b.set_min_proto_version(Some(v)).map_err(|e| failed("min version", e))?;
    b.set_max_proto_version(Some(v)).map_err(|e| failed("max version", e))?;
    let fips = crate::fips::mode("openssl");
    if fips {
        fips_allows(p)?;
    }
    if p.version == TlsVersion::Tls12 && p.cert == CertKind::EcdsaP256 && p.group != Group::P256 {
        // RFC 8422 5.1: in TLS 1.2 the supported groups also name the curves an ECDSA
        // certificate may use; OpenSSL enforces it on both sides, so a client offering only
        // x25519 leaves a P-256 certificate unusable ("no shared cipher").
        return Err(BackendError::Unsupported(format!(
            "OpenSSL's TLS 1.2 needs the P-256 certificate's curve among the offered groups (RFC 8422 5.1), \
             and only {} is offered",
            p.group.name()
        )));
    }
    let name = |g: Group| match g {
        Group::X25519 => "X25519",
        Group::P256 => "P-256",
        Group::X25519MlKem768 => "X25519MLKEM768",
    };
    let listed = match p.fallback_group.filter(|g| *g != p.group) {
        Some(f) => format!("{}:{}", name(p.group), name(f)),
        None => name(p.group).to_string(),
    };
    let groups = listed.as_str();
    if let Err(e) = b.set_groups_list(groups) {
        return Err(BackendError::Unsupported(match p.group {
            Group::X25519MlKem768 => format!(
                "{} has no X25519MLKEM768 (OpenSSL 3.5 and later have it: a configuration with \
                 library = \"openssl@3.6\" runs OpenSSL 3.6)",
                version_text()
            ),
            _ => format!("{} has no group {groups}: {e}", version_text()),
        }));
    }
    let suite = p.cipher_suite();
    match p.version {
        TlsVersion::Tls13 => b.set_ciphersuites(suite.openssl),
        TlsVersion::Tls12 => b.set_cipher_list(suite.openssl),
    }
    .map_err(|e| BackendError::Unsupported(format!("{} has no {}: {e}", version_text(), suite.iana)))?;
    if let Some(n) = p.record_bytes {
        // SAFETY: SSL_CTX_set_max_send_fragment on the builder's own context.
        let ok = unsafe { ffi::SSL_CTX_ctrl(b.as_ptr(), SSL_CTRL_SET_MAX_SEND_FRAGMENT, n as c_long, std::ptr::null_mut()) };
        if ok != 1 {
            return Err(BackendError::Unsupported(format!("OpenSSL rejects max_send_fragment {n}")));
        }
    }
    Ok(())
}

/// Under OpenSSL's FIPS provider, `Unsupported` for what it does not serve as approved in TLS:
/// ChaCha20-Poly1305 (not carried), X25519 and the X25519MLKEM768 hybrid as key exchange
/// (X25519 is carried but not approved; the 3.1 provider has no ML-KEM), an Ed25519
/// certificate (no EdDSA). The same list as the primitives' (`crate::fips::refusal`).
fn fips_allows(p: &TlsParams) -> Result<(), BackendError> {
    if p.suite == Suite::Chacha20Poly1305 {
        return Err(BackendError::Unsupported(
            "ChaCha20-Poly1305 is not in OpenSSL's FIPS provider; use suite = \"aes-128-gcm\" or \"aes-256-gcm\"".into(),
        ));
    }
    for g in std::iter::once(p.group).chain(p.fallback_group) {
        if g != Group::P256 {
            return Err(BackendError::Unsupported(format!(
                "key exchange {} is not an approved service of OpenSSL's FIPS provider (X25519 is not an \
                 SP 800-56A Rev. 3 scheme; the 3.1 provider has no ML-KEM); use group = \"p256\"",
                g.name()
            )));
        }
    }
    if p.cert == CertKind::Ed25519 {
        return Err(BackendError::Unsupported(
            "an Ed25519 certificate cannot be used under OpenSSL's 3.1 FIPS provider (it carries no EdDSA)".into(),
        ));
    }
    Ok(())
}

struct OpenSslServer {
    ctx: SslContext,
}

struct OpenSslClient {
    ctx: SslContext,
    /// The newest session the server gave us (resumption only).
    cache: Option<Arc<Mutex<Option<SslSession>>>>,
}

/// The server configuration (see [`super::server`]).
pub(super) fn server(id: &Identity, p: &TlsParams) -> Result<Arc<dyn ServerStack>, BackendError> {
    if id.signing.is_some() {
        return Err(BackendError::Unsupported(
            "OpenSSL's TLS here signs only with a key it holds; a server key on another backend needs rustls (tls-handshake's stack = \"aws-lc\" or \"ring\")".into(),
        ));
    }
    let mut b = SslContextBuilder::new(SslMethod::tls_server()).map_err(|e| failed("context", e))?;
    configure(&mut b, p)?;
    let leaf = id.cert_chain_der.first().ok_or_else(|| BackendError::Failed("empty certificate chain".into()))?;
    let leaf = X509::from_der(leaf).map_err(|e| failed("leaf certificate", e))?;
    b.set_certificate(&leaf).map_err(|e| failed("leaf certificate", e))?;
    for extra in &id.cert_chain_der[1..] {
        b.add_extra_chain_cert(X509::from_der(extra).map_err(|e| failed("chain certificate", e))?)
            .map_err(|e| failed("chain certificate", e))?;
    }
    let key = PKey::private_key_from_pkcs8(&id.key_pkcs8_der).map_err(|e| failed("private key", e))?;
    b.set_private_key(&key).map_err(|e| failed("private key", e))?;
    b.check_private_key().map_err(|e| failed("key/certificate check", e))?;
    b.set_options(SslOptions::NO_RENEGOTIATION);
    if p.resume {
        // Session tickets (TLS 1.2 and 1.3) are on by default; the id context is what OpenSSL
        // checks a resumed session against.
        b.set_session_id_context(b"cryptoperf").map_err(|e| failed("session id context", e))?;
    } else {
        b.set_options(SslOptions::NO_TICKET);
        b.set_num_tickets(0).map_err(|e| failed("num_tickets", e))?;
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    Ok(Arc::new(OpenSslServer { ctx: b.build() }))
}

/// The client configuration (see [`super::client`]).
pub(super) fn client(id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    let mut b = SslContextBuilder::new(SslMethod::tls_client()).map_err(|e| failed("context", e))?;
    configure(&mut b, p)?;
    let mut store = X509StoreBuilder::new().map_err(|e| failed("trust store", e))?;
    store
        .add_cert(X509::from_der(&id.ca_der).map_err(|e| failed("CA certificate", e))?)
        .map_err(|e| failed("trust store", e))?;
    b.set_verify_cert_store(store.build()).map_err(|e| failed("trust store", e))?;
    b.set_verify(SslVerifyMode::PEER);
    let cache = if p.resume {
        let cache: Arc<Mutex<Option<SslSession>>> = Arc::new(Mutex::new(None));
        let slot = cache.clone();
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT | SslSessionCacheMode::NO_INTERNAL);
        b.set_new_session_callback(move |_ssl, session| {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(session);
        });
        Some(cache)
    } else {
        b.set_options(SslOptions::NO_TICKET);
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
        None
    };
    Ok(Arc::new(OpenSslClient { ctx: b.build(), cache }))
}

/// A trust store holding the one CA certificate `ca_der`.
fn trust(ca_der: &[u8]) -> Result<openssl::x509::store::X509Store, BackendError> {
    let mut store = X509StoreBuilder::new().map_err(|e| failed("trust store", e))?;
    store
        .add_cert(X509::from_der(ca_der).map_err(|e| failed("CA certificate", e))?)
        .map_err(|e| failed("trust store", e))?;
    Ok(store.build())
}

/// The mutual-TLS server configuration (see [`super::mutual_server`]): one context that
/// requires a client certificate from the CA, and a servername callback that sets, on each
/// connection, the certificate and key of the identity its SNI names (each pool key parsed once).
pub(super) fn mutual_server(client_ca_der: &[u8], identities: &[NamedIdentity], p: &TlsParams)
    -> Result<Arc<dyn ServerStack>, BackendError> {
    let mut b = SslContextBuilder::new(SslMethod::tls_server()).map_err(|e| failed("context", e))?;
    configure(&mut b, p)?;
    b.set_verify_cert_store(trust(client_ca_der)?).map_err(|e| failed("trust store", e))?;
    b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
    b.set_options(SslOptions::NO_RENEGOTIATION | SslOptions::NO_TICKET);
    b.set_num_tickets(0).map_err(|e| failed("num_tickets", e))?;
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    let mut keys: std::collections::HashMap<usize, PKey<openssl::pkey::Private>> = std::collections::HashMap::new();
    let mut by_name: std::collections::HashMap<String, (X509, usize)> = std::collections::HashMap::new();
    for id in identities {
        if !keys.contains_key(&id.key_index) {
            let key = PKey::private_key_from_pkcs8(super::pool_key(p.cert, id.key_index)).map_err(|e| failed("private key", e))?;
            keys.insert(id.key_index, key);
        }
        let leaf = id.chain_der.first().ok_or_else(|| BackendError::Failed(format!("{}: empty certificate chain", id.name)))?;
        let leaf = X509::from_der(leaf).map_err(|e| failed("leaf certificate", e))?;
        by_name.insert(id.name.to_ascii_lowercase(), (leaf, id.key_index));
    }
    b.set_servername_callback(move |ssl: &mut SslRef, alert: &mut SslAlert| -> Result<(), SniError> {
        let name = ssl.servername(NameType::HOST_NAME).map(str::to_ascii_lowercase);
        let Some((leaf, key)) = name.as_deref().and_then(|n| by_name.get(n)) else {
            *alert = SslAlert::UNRECOGNIZED_NAME;
            return Err(SniError::ALERT_FATAL);
        };
        let set = ssl.set_certificate(leaf).and_then(|_| ssl.set_private_key(&keys[key]));
        set.map_err(|_| SniError::ALERT_FATAL)
    });
    Ok(Arc::new(OpenSslServer { ctx: b.build() }))
}

/// The mutual-TLS client configuration (see [`super::mutual_client`]): as [`client`] without
/// resumption, with `id`'s leaf and key as the client certificate.
pub(super) fn mutual_client(id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    let mut b = SslContextBuilder::new(SslMethod::tls_client()).map_err(|e| failed("context", e))?;
    configure(&mut b, p)?;
    b.set_verify_cert_store(trust(&id.ca_der)?).map_err(|e| failed("trust store", e))?;
    b.set_verify(SslVerifyMode::PEER);
    b.set_options(SslOptions::NO_TICKET);
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    let leaf = id.cert_chain_der.first().ok_or_else(|| BackendError::Failed("empty client certificate chain".into()))?;
    let leaf = X509::from_der(leaf).map_err(|e| failed("client certificate", e))?;
    b.set_certificate(&leaf).map_err(|e| failed("client certificate", e))?;
    let key = PKey::private_key_from_pkcs8(&id.key_pkcs8_der).map_err(|e| failed("client key", e))?;
    b.set_private_key(&key).map_err(|e| failed("client key", e))?;
    b.check_private_key().map_err(|e| failed("client key/certificate check", e))?;
    Ok(Arc::new(OpenSslClient { ctx: b.build(), cache: None }))
}

impl ServerStack for OpenSslServer {
    fn accept(&self, transport: Box<dyn Transport>) -> Result<Box<dyn Session>, String> {
        let mut ssl = Ssl::new(&self.ctx).map_err(|e| format!("OpenSSL: {e}"))?;
        ssl.set_accept_state();
        let stream = SslStream::new(ssl, transport).map_err(|e| format!("OpenSSL: {e}"))?;
        Ok(Box::new(OpenSslSession { stream, server: true, done: false }))
    }
    fn fips(&self) -> bool {
        crate::fips::mode("openssl")
    }
}

impl ClientStack for OpenSslClient {
    fn connect_to(&self, transport: Box<dyn Transport>, server_name: &str) -> Result<Box<dyn Session>, String> {
        let mut ssl = Ssl::new(&self.ctx).map_err(|e| format!("OpenSSL: {e}"))?;
        ssl.set_connect_state();
        ssl.set_hostname(server_name).map_err(|e| format!("OpenSSL SNI: {e}"))?;
        ssl.param_mut().set_host(server_name).map_err(|e| format!("OpenSSL host check: {e}"))?;
        if let Some(cache) = &self.cache {
            if let Some(session) = cache.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                // SAFETY: the session comes from a connection of this same context.
                unsafe { ssl.set_session(session) }.map_err(|e| format!("OpenSSL set_session: {e}"))?;
            }
        }
        let stream = SslStream::new(ssl, transport).map_err(|e| format!("OpenSSL: {e}"))?;
        Ok(Box::new(OpenSslSession { stream, server: false, done: false }))
    }
    fn fips(&self) -> bool {
        crate::fips::mode("openssl")
    }
}

/// One OpenSSL connection over its transport.
struct OpenSslSession {
    stream: SslStream<Box<dyn Transport>>,
    server: bool,
    done: bool,
}

fn would_block(e: &openssl::ssl::Error) -> bool {
    e.code() == ErrorCode::WANT_READ || e.code() == ErrorCode::WANT_WRITE
}

/// The error text, with the certificate verification result when that is what failed.
fn describe(ssl: &SslRef, e: &openssl::ssl::Error) -> String {
    let verify = ssl.verify_result();
    if verify != openssl::x509::X509VerifyResult::OK {
        format!("OpenSSL: {e} (certificate verification: {})", verify.error_string())
    } else {
        format!("OpenSSL: {e}")
    }
}

/// TLS SignatureScheme name from OpenSSL's signature type and digest NIDs.
fn scheme_from_nids(sig_type: Nid, digest: Nid) -> String {
    const ED25519: Nid = Nid::from_raw(ffi::NID_ED25519);
    const ED448: Nid = Nid::from_raw(ffi::NID_ED448);
    let hash = |d: Nid| match d {
        Nid::SHA1 => Some("sha1"),
        Nid::SHA256 => Some("sha256"),
        Nid::SHA384 => Some("sha384"),
        Nid::SHA512 => Some("sha512"),
        _ => None,
    };
    let code: Option<u16> = match (sig_type, hash(digest)) {
        (ED25519, _) => Some(0x0807),
        (ED448, _) => Some(0x0808),
        // Our RSA keys are rsaEncryption keys, so PSS is rsa_pss_rsae_*.
        (Nid::RSASSAPSS, Some("sha256")) => Some(0x0804),
        (Nid::RSASSAPSS, Some("sha384")) => Some(0x0805),
        (Nid::RSASSAPSS, Some("sha512")) => Some(0x0806),
        (Nid::RSAENCRYPTION, Some("sha1")) => Some(0x0201),
        (Nid::RSAENCRYPTION, Some("sha256")) => Some(0x0401),
        (Nid::RSAENCRYPTION, Some("sha384")) => Some(0x0501),
        (Nid::RSAENCRYPTION, Some("sha512")) => Some(0x0601),
        (Nid::X9_62_ID_ECPUBLICKEY, Some("sha1")) => Some(0x0203),
        (Nid::X9_62_ID_ECPUBLICKEY, Some("sha256")) => Some(0x0403),
        (Nid::X9_62_ID_ECPUBLICKEY, Some("sha384")) => Some(0x0503),
        (Nid::X9_62_ID_ECPUBLICKEY, Some("sha512")) => Some(0x0603),
        _ => None,
    };
    match code {
        Some(c) => scheme_name(c),
        None => format!(
            "{}+{}",
            sig_type.short_name().unwrap_or("?"),
            digest.short_name().unwrap_or("?")
        ),
    }
}

impl OpenSslSession {
    fn group(&self) -> String {
        let ssl = self.stream.ssl().as_ptr();
        // SAFETY: SSL_get_negotiated_group on our live SSL.
        let nid = unsafe { ffi::SSL_ctrl(ssl, SSL_CTRL_GET_NEGOTIATED_GROUP, 0, std::ptr::null_mut()) };
        if nid <= 0 {
            return "none".into();
        }
        if nid & TLSEXT_NID_UNKNOWN != 0 {
            return group_name((nid & 0xffff) as u16);
        }
        match Nid::from_raw(nid as c_int) {
            n if n.as_raw() == ffi::NID_X25519 => "x25519".into(),
            Nid::X9_62_PRIME256V1 => "p256".into(),
            other => other.short_name().map(str::to_string).unwrap_or_else(|_| format!("nid {nid}")),
        }
    }

    fn signature_scheme(&self) -> String {
        let ssl = self.stream.ssl().as_ptr();
        let (mut sig_type, mut digest): (c_int, c_int) = (0, 0);
        // SAFETY: the getters write one int each into our locals.
        let ok = unsafe {
            if self.server {
                SSL_get_signature_type_nid(ssl, &mut sig_type) == 1
                    && ffi::SSL_ctrl(ssl, SSL_CTRL_GET_SIGNATURE_NID, 0, &mut digest as *mut c_int as *mut _) == 1
            } else {
                SSL_get_peer_signature_type_nid(ssl, &mut sig_type) == 1
                    && ffi::SSL_ctrl(ssl, SSL_CTRL_GET_PEER_SIGNATURE_NID, 0, &mut digest as *mut c_int as *mut _) == 1
            }
        };
        if !ok {
            // Ed25519 has no separate digest; its getter may fail while the type is known.
            if sig_type == ffi::NID_ED25519 {
                return "ed25519".into();
            }
            return "none".into();
        }
        scheme_from_nids(Nid::from_raw(sig_type), Nid::from_raw(digest))
    }
}

impl Session for OpenSslSession {
    fn handshake(&mut self) -> Result<bool, String> {
        if self.done {
            return Ok(true);
        }
        match self.stream.do_handshake() {
            Ok(()) => {
                self.done = true;
                Ok(true)
            }
            Err(e) if would_block(&e) => Ok(false),
            Err(e) => Err(describe(self.stream.ssl(), &e)),
        }
    }

    fn write_all(&mut self, mut buf: &[u8]) -> Result<(), String> {
        while !buf.is_empty() {
            match self.stream.ssl_write(buf) {
                Ok(n) => buf = &buf[n..],
                Err(e) => return Err(describe(self.stream.ssl(), &e)),
            }
        }
        let _ = self.stream.get_mut().flush();
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, String> {
        match self.stream.ssl_read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.code() == ErrorCode::ZERO_RETURN => Ok(Some(0)),
            Err(e) if would_block(&e) => Ok(None),
            Err(e) => Err(describe(self.stream.ssl(), &e)),
        }
    }

    fn negotiated(&self) -> Negotiated {
        let ssl = self.stream.ssl();
        let resumed = ssl.session_reused();
        Negotiated {
            version: ssl.version_str().to_string(),
            cipher_suite: ssl
                .current_cipher()
                .map(|c| c.standard_name().unwrap_or(c.name()).to_string())
                .unwrap_or_else(|| "none".into()),
            // OpenSSL reports a resumed TLS 1.2 session's original group (SSL_SESSION's
            // kex_group), though no key exchange happened in this handshake.
            group: if resumed && ssl.version2() == Some(SslVersion::TLS1_2) { "none".into() } else { self.group() },
            signature_scheme: if resumed { "none".into() } else { self.signature_scheme() },
            resumed,
        }
    }

    fn peer_certificate(&self) -> Option<Vec<u8>> {
        self.stream.ssl().peer_certificate().and_then(|c| c.to_der().ok())
    }

    fn close(&mut self) {
        let _ = self.stream.shutdown();
    }
}
