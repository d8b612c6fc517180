//! rustls 0.23 over one of its crypto providers: aws-lc-rs (AWS-LC; the AWS-LC FIPS module in
//! the FIPS build, through rustls's `fips` feature) or ring.
//!
//! Each configuration's provider holds only the one cipher suite and key-exchange group asked
//! for. rustls does not expose the signature scheme a handshake used, so the client records it
//! from a certificate verifier wrapped around rustls's webpki verifier, and the server from a
//! signing key wrapped around its own; both record into a thread-local slot that the session
//! collects right after each call into rustls (rustls calls them synchronously, inside
//! `process_new_packets`), so any number of connections can share a configuration and a thread.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert, ResolvesServerCertUsingSni, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, Signer, SigningKey};
use rustls::{
    ClientConfig, ClientConnection, Connection, DigitallySignedStruct, HandshakeKind, RootCertStore,
    ServerConfig, ServerConnection, SignatureAlgorithm, SignatureScheme, SupportedCipherSuite,
    SupportedProtocolVersion,
};

use super::{
    group_name, scheme_name, suite_name, ClientStack, Identity, NamedIdentity, Negotiated, ServerStack, Session,
    TlsParams, TlsVersion, Transport,
};
use crate::backends::BackendError;

/// Which rustls crypto provider a configuration uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    /// `rustls::crypto::aws_lc_rs` (the FIPS module in the FIPS build).
    AwsLc,
    /// `rustls::crypto::ring`.
    Ring,
}

impl Provider {
    fn label(&self) -> &'static str {
        match self {
            Provider::AwsLc => "rustls (aws-lc-rs)",
            Provider::Ring => "rustls (ring)",
        }
    }
}

thread_local! {
    /// The signature scheme the last client-side verification in this thread checked.
    static VERIFIED_SCHEME: Cell<Option<SignatureScheme>> = const { Cell::new(None) };
    /// The signature scheme the last server-side signing key in this thread chose.
    static SIGNED_SCHEME: Cell<Option<SignatureScheme>> = const { Cell::new(None) };
}

/// The provider with only the suite and group `p` asks for, or why it cannot be had.
fn provider(which: Provider, p: &TlsParams) -> Result<CryptoProvider, BackendError> {
    let (base, suites, groups): (CryptoProvider, &[SupportedCipherSuite], &[&'static dyn SupportedKxGroup]) = match which {
        Provider::AwsLc => (
            rustls::crypto::aws_lc_rs::default_provider(),
            rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES,
            rustls::crypto::aws_lc_rs::ALL_KX_GROUPS,
        ),
        Provider::Ring => (
            rustls::crypto::ring::default_provider(),
            rustls::crypto::ring::ALL_CIPHER_SUITES,
            rustls::crypto::ring::ALL_KX_GROUPS,
        ),
    };
    let want = p.cipher_suite();
    let suite = suites.iter().find(|s| u16::from(s.suite()) == want.code).copied().ok_or_else(|| {
        BackendError::Unsupported(format!("{} has no {}", which.label(), want.iana))
    })?;
    let group = groups.iter().find(|g| u16::from(g.name()) == p.group.code()).copied().ok_or_else(|| {
        BackendError::Unsupported(match (which, p.group) {
            (Provider::Ring, super::Group::X25519MlKem768) => {
                "rustls's ring provider has no X25519MLKEM768 (ring has no ML-KEM)".to_string()
            }
            _ => format!("{} has no key-exchange group {}", which.label(), p.group.name()),
        })
    })?;
    if cfg!(feature = "fips") && which == Provider::AwsLc {
        // The FIPS build measures the FIPS module only under what it approves; rustls says.
        if !suite.fips() {
            return Err(BackendError::Unsupported(format!(
                "{} is not FIPS-approved in rustls's FIPS provider; use suite = \"aes-128-gcm\" or \"aes-256-gcm\"",
                want.iana
            )));
        }
        if !group.fips() {
            return Err(BackendError::Unsupported(format!(
                "key exchange {} is not FIPS-approved in rustls's FIPS provider; use group = \"p256\"",
                p.group.name()
            )));
        }
    }
    let mut kx_groups = vec![group];
    if let Some(fallback) = p.fallback_group.filter(|g| *g != p.group) {
        let extra = groups.iter().find(|g| u16::from(g.name()) == fallback.code()).copied().ok_or_else(|| {
            BackendError::Unsupported(format!("{} has no key-exchange group {}", which.label(), fallback.name()))
        })?;
        kx_groups.push(extra);
    }
    Ok(CryptoProvider { cipher_suites: vec![suite], kx_groups, ..base })
}

fn versions(v: TlsVersion) -> &'static [&'static SupportedProtocolVersion] {
    static TLS12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];
    static TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
    match v {
        TlsVersion::Tls12 => TLS12,
        TlsVersion::Tls13 => TLS13,
    }
}

/// rustls's `max_fragment_size` counts the 5-byte record header; ours is the plaintext.
fn max_fragment(p: &TlsParams) -> Option<usize> {
    p.record_bytes.map(|n| n + 5)
}

/// In the FIPS build, `Unsupported` unless rustls reports the configuration FIPS (checked per
/// part above; this catches the rest, e.g. the certificate's key type).
fn require_fips(which: Provider, fips: bool, p: &TlsParams) -> Result<(), BackendError> {
    if cfg!(feature = "fips") && which == Provider::AwsLc && !fips {
        return Err(BackendError::Unsupported(format!(
            "rustls does not report this configuration ({} certificate, {}, {}) as FIPS",
            p.cert.name(),
            p.group.name(),
            p.cipher_suite().iana
        )));
    }
    Ok(())
}

/// The server signing key, recording the scheme it chooses in [`SIGNED_SCHEME`].
#[derive(Debug)]
struct RecordingKey(Arc<dyn SigningKey>);

impl SigningKey for RecordingKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        let signer = self.0.choose_scheme(offered)?;
        SIGNED_SCHEME.with(|s| s.set(Some(signer.scheme())));
        Some(signer)
    }
    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        self.0.public_key()
    }
    fn algorithm(&self) -> SignatureAlgorithm {
        self.0.algorithm()
    }
}

/// Always the one certificate.
#[derive(Debug)]
struct OneCert(Arc<CertifiedKey>);

impl ResolvesServerCert for OneCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The webpki verifier, recording the scheme of the handshake signature it checks in
/// [`VERIFIED_SCHEME`].
#[derive(Debug)]
struct RecordingVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for RecordingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let valid = self.0.verify_tls12_signature(message, cert, dss)?;
        VERIFIED_SCHEME.with(|s| s.set(Some(dss.scheme)));
        Ok(valid)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let valid = self.0.verify_tls13_signature(message, cert, dss)?;
        VERIFIED_SCHEME.with(|s| s.set(Some(dss.scheme)));
        Ok(valid)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

struct RustlsServer {
    config: Arc<ServerConfig>,
}

struct RustlsClient {
    config: Arc<ClientConfig>,
}

/// The server configuration (see [`super::server`]).
pub(super) fn server(which: Provider, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ServerStack>, BackendError> {
    let provider = Arc::new(provider(which, p)?);
    let key: Arc<dyn SigningKey> = match &id.signing {
        // The key on another backend of the worker signs every handshake.
        Some(key) => Arc::new(super::backend_key::RustlsKey(key.clone())),
        None => provider
            .key_provider
            .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(id.key_pkcs8_der.clone())))
            .map_err(|e| BackendError::Failed(format!("{} rejects the {} key: {e}", which.label(), p.cert.name())))?,
    };
    let chain = id.cert_chain_der.iter().map(|c| CertificateDer::from(c.clone())).collect();
    let certified = CertifiedKey::new(chain, Arc::new(RecordingKey(key)));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(p.version))
        .map_err(|e| BackendError::Unsupported(format!("{}: {e}", which.label())))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(OneCert(Arc::new(certified))));
    config.max_fragment_size = max_fragment(p);
    if p.resume {
        config.ticketer = match which {
            Provider::AwsLc => rustls::crypto::aws_lc_rs::Ticketer::new(),
            Provider::Ring => rustls::crypto::ring::Ticketer::new(),
        }
        .map_err(|e| BackendError::Failed(format!("{} ticketer: {e}", which.label())))?;
    } else {
        config.send_tls13_tickets = 0;
        config.session_storage = Arc::new(NoServerSessionStorage {});
    }
    require_fips(which, config.fips(), p)?;
    Ok(Arc::new(RustlsServer { config: Arc::new(config) }))
}

/// The client configuration (see [`super::client`]).
pub(super) fn client(which: Provider, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    let provider = Arc::new(provider(which, p)?);
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(id.ca_der.clone()))
        .map_err(|e| BackendError::Failed(format!("{} rejects the CA certificate: {e}", which.label())))?;
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| BackendError::Failed(format!("{} verifier: {e}", which.label())))?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(p.version))
        .map_err(|e| BackendError::Unsupported(format!("{}: {e}", which.label())))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(RecordingVerifier(verifier)))
        .with_no_client_auth();
    config.max_fragment_size = max_fragment(p);
    config.resumption = if p.resume { Resumption::in_memory_sessions(256) } else { Resumption::disabled() };
    require_fips(which, config.fips(), p)?;
    Ok(Arc::new(RustlsClient { config: Arc::new(config) }))
}

/// A root store holding the one CA certificate `ca_der`.
fn roots(which: Provider, ca_der: &[u8]) -> Result<Arc<RootCertStore>, BackendError> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca_der.to_vec()))
        .map_err(|e| BackendError::Failed(format!("{} rejects the CA certificate: {e}", which.label())))?;
    Ok(Arc::new(roots))
}

/// The mutual-TLS server configuration (see [`super::mutual_server`]): rustls's SNI resolver
/// over every identity (each pool key loaded once and shared by the identities over it, wrapped
/// to record the scheme it signs with) and its webpki client verifier, which requires a
/// certificate from the CA.
pub(super) fn mutual_server(which: Provider, client_ca_der: &[u8], identities: &[NamedIdentity], p: &TlsParams)
    -> Result<Arc<dyn ServerStack>, BackendError> {
    let provider = Arc::new(provider(which, p)?);
    let mut keys: std::collections::HashMap<usize, Arc<dyn SigningKey>> = std::collections::HashMap::new();
    let mut resolver = ResolvesServerCertUsingSni::new();
    for id in identities {
        let key = match keys.get(&id.key_index) {
            Some(k) => k.clone(),
            None => {
                let der = super::pool_key(p.cert, id.key_index).to_vec();
                let key = provider
                    .key_provider
                    .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der)))
                    .map_err(|e| BackendError::Failed(format!("{} rejects the {} key: {e}", which.label(), p.cert.name())))?;
                let key: Arc<dyn SigningKey> = Arc::new(RecordingKey(key));
                keys.insert(id.key_index, key.clone());
                key
            }
        };
        let chain = id.chain_der.iter().map(|c| CertificateDer::from(c.clone())).collect();
        resolver
            .add(&id.name, CertifiedKey::new(chain, key))
            .map_err(|e| BackendError::Failed(format!("{}: the certificate of {}: {e}", which.label(), id.name)))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(which, client_ca_der)?, provider.clone())
        .build()
        .map_err(|e| BackendError::Failed(format!("{} client verifier: {e}", which.label())))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(p.version))
        .map_err(|e| BackendError::Unsupported(format!("{}: {e}", which.label())))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(resolver));
    config.max_fragment_size = max_fragment(p);
    config.send_tls13_tickets = 0;
    config.session_storage = Arc::new(NoServerSessionStorage {});
    require_fips(which, config.fips(), p)?;
    Ok(Arc::new(RustlsServer { config: Arc::new(config) }))
}

/// The mutual-TLS client configuration (see [`super::mutual_client`]): as [`client`], with
/// `id`'s chain and key as its client certificate and no resumption.
pub(super) fn mutual_client(which: Provider, id: &Identity, p: &TlsParams) -> Result<Arc<dyn ClientStack>, BackendError> {
    let provider = Arc::new(provider(which, p)?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots(which, &id.ca_der)?, provider.clone())
        .build()
        .map_err(|e| BackendError::Failed(format!("{} verifier: {e}", which.label())))?;
    let chain = id.cert_chain_der.iter().map(|c| CertificateDer::from(c.clone())).collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(id.key_pkcs8_der.clone()));
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(p.version))
        .map_err(|e| BackendError::Unsupported(format!("{}: {e}", which.label())))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(RecordingVerifier(verifier)))
        .with_client_auth_cert(chain, key)
        .map_err(|e| BackendError::Failed(format!("{} rejects the client certificate or key: {e}", which.label())))?;
    config.max_fragment_size = max_fragment(p);
    config.resumption = Resumption::disabled();
    require_fips(which, config.fips(), p)?;
    Ok(Arc::new(RustlsClient { config: Arc::new(config) }))
}

impl ServerStack for RustlsServer {
    fn accept(&self, transport: Box<dyn Transport>) -> Result<Box<dyn Session>, String> {
        let conn = ServerConnection::new(self.config.clone()).map_err(|e| format!("rustls: {e}"))?;
        Ok(Box::new(RustlsSession { conn: Connection::Server(conn), transport, scheme: None }))
    }
    fn fips(&self) -> bool {
        self.config.fips()
    }
}

impl ClientStack for RustlsClient {
    fn connect_to(&self, transport: Box<dyn Transport>, server_name: &str) -> Result<Box<dyn Session>, String> {
        let name = ServerName::try_from(server_name.to_string()).map_err(|e| format!("server name {server_name}: {e}"))?;
        let conn = ClientConnection::new(self.config.clone(), name).map_err(|e| format!("rustls: {e}"))?;
        Ok(Box::new(RustlsSession { conn: Connection::Client(conn), transport, scheme: None }))
    }
    fn fips(&self) -> bool {
        self.config.fips()
    }
}

/// One rustls connection over its transport.
struct RustlsSession {
    conn: Connection,
    transport: Box<dyn Transport>,
    /// The handshake signature's scheme, collected from the thread-local slot.
    scheme: Option<SignatureScheme>,
}

impl RustlsSession {
    /// The thread-local slot of this side.
    fn slot(&self) -> &'static std::thread::LocalKey<Cell<Option<SignatureScheme>>> {
        match self.conn {
            Connection::Client(_) => &VERIFIED_SCHEME,
            Connection::Server(_) => &SIGNED_SCHEME,
        }
    }

    /// Write out everything rustls has queued. `WouldBlock` leaves the rest queued.
    fn flush(&mut self) -> Result<(), String> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.transport) {
                Ok(0) => return Err("the transport accepts no more bytes".into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("writing to the transport: {e}")),
            }
        }
        Ok(())
    }

    /// Read what the transport has and process it: `Ok(true)` something was read (or the
    /// transport reached its end), `Ok(false)` it would block. Processing errors (alerts
    /// included) are flushed to the peer and returned.
    fn receive(&mut self) -> Result<bool, String> {
        let n = loop {
            match self.conn.read_tls(&mut self.transport) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading from the transport: {e}")),
            }
        };
        let slot = self.slot();
        slot.with(|s| s.set(None));
        let processed = self.conn.process_new_packets();
        if let Some(scheme) = slot.with(|s| s.take()) {
            self.scheme = Some(scheme);
        }
        if let Err(e) = processed {
            let _ = self.flush(); // the alert
            return Err(format!("rustls: {e}"));
        }
        if n == 0 && self.conn.is_handshaking() {
            return Err("the peer closed the connection during the handshake".into());
        }
        Ok(true)
    }
}

impl Session for RustlsSession {
    fn handshake(&mut self) -> Result<bool, String> {
        loop {
            self.flush()?;
            if !self.conn.is_handshaking() {
                return Ok(true);
            }
            if !self.receive()? {
                return Ok(false);
            }
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> Result<(), String> {
        self.conn.writer().write_all(buf).map_err(|e| format!("rustls: {e}"))?;
        self.flush()
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, String> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("rustls: {e}")),
            }
            if !self.receive()? {
                return Ok(None);
            }
            self.flush()?; // e.g. a key update's answer
        }
    }

    fn negotiated(&self) -> Negotiated {
        let resumed = self.conn.handshake_kind() == Some(HandshakeKind::Resumed);
        Negotiated {
            version: match self.conn.protocol_version() {
                Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".into(),
                Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".into(),
                Some(v) => format!("{v:?}"),
                None => "none".into(),
            },
            cipher_suite: self
                .conn
                .negotiated_cipher_suite()
                .map(|s| suite_name(u16::from(s.suite())))
                .unwrap_or_else(|| "none".into()),
            group: self
                .conn
                .negotiated_key_exchange_group()
                .map(|g| group_name(u16::from(g.name())))
                .unwrap_or_else(|| "none".into()),
            signature_scheme: match (resumed, self.scheme) {
                (false, Some(s)) => scheme_name(u16::from(s)),
                _ => "none".into(),
            },
            resumed,
        }
    }

    fn peer_certificate(&self) -> Option<Vec<u8>> {
        self.conn.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec())
    }

    fn close(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
    }
}
