//! Tests of the TLS stacks: every combination runs or says why not, stacks interoperate in
//! memory and over TCP, what is negotiated is what was asked for.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::sync::{Mutex, OnceLock};

use super::*;

/// One identity per key kind, generated once per test process (RSA-4096 is slow).
fn identity(kind: CertKind) -> Identity {
    static CACHE: OnceLock<Mutex<HashMap<CertKind, Identity>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.entry(kind).or_insert_with(|| Identity::generate(kind).expect("identity")).clone()
}

fn params(version: TlsVersion, cert: CertKind, group: Group, suite: Suite, resume: bool) -> TlsParams {
    TlsParams { version, cert, group, suite, resume, record_bytes: None, fallback_group: None }
}

/// A client and a server configuration.
type Pair = (Arc<dyn ClientStack>, Arc<dyn ServerStack>);

/// Both configurations, or the reason one is unsupported. `Failed` is a test failure.
fn stacks(client_stack: Stack, server_stack: Stack, p: &TlsParams) -> Result<Pair, String> {
    let id = identity(p.cert);
    let s = server(server_stack, &id, p);
    let c = client(client_stack, &id, p);
    match (c, s) {
        (Ok(c), Ok(s)) => Ok((c, s)),
        (Err(BackendError::Failed(e)), _) | (_, Err(BackendError::Failed(e))) => {
            panic!("{client_stack:?} -> {server_stack:?} {p:?}: configuration failed: {e}")
        }
        (Err(BackendError::Unsupported(why)), _) | (_, Err(BackendError::Unsupported(why))) => {
            assert!(!why.trim().is_empty(), "an unsupported combination must say why");
            Err(why)
        }
    }
}

/// Run `p` between the two stacks: for resumption one priming transaction first (a full
/// handshake), then the measured one, which must match `p` exactly. Returns the Negotiated of
/// the checked transaction, or the reason the combination is unsupported.
fn run(client_stack: Stack, server_stack: Stack, p: &TlsParams) -> Result<Negotiated, String> {
    let (c, s) = stacks(client_stack, server_stack, p)?;
    let what = format!("{client_stack:?} -> {server_stack:?} {p:?}");
    if p.resume {
        let prime = transaction_in_memory(c.as_ref(), s.as_ref()).unwrap_or_else(|e| panic!("{what}, priming: {e}"));
        assert!(!prime.negotiated.resumed, "{what}: a fresh client resumed");
        let full = TlsParams { resume: false, ..*p };
        assert_eq!(prime.negotiated.mismatch(&full), None, "{what}, priming");
    }
    let out = transaction_in_memory(c.as_ref(), s.as_ref()).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(out.negotiated.mismatch(p), None, "{what}: {:?}", out.negotiated);
    assert!(out.client_cpu_ns > 0 && out.server_cpu_ns > 0, "{what}: no CPU time measured: {out:?}");
    Ok(out.negotiated)
}

/// Whether this build's OpenSSL has X25519MLKEM768 (3.5 and later).
fn openssl_has_mlkem() -> bool {
    openssl::version::number() >= 0x3050_0000
}

/// Every version × certificate × group × resumption of `stack` against itself: it runs and
/// negotiates exactly that, or it is unsupported with a reason; in the default build only
/// where the library really lacks the group.
fn every_combination(stack: Stack) {
    let (mut ran, mut unsupported) = (0, Vec::new());
    for version in TlsVersion::ALL {
        for cert in CertKind::ALL {
            for group in Group::ALL {
                for resume in [false, true] {
                    let p = params(*version, *cert, *group, Suite::Aes128Gcm, resume);
                    match run(stack, stack, &p) {
                        Ok(n) => {
                            ran += 1;
                            assert_eq!(n.resumed, resume);
                            if resume && *version == TlsVersion::Tls12 {
                                assert_eq!(n.group, "none", "TLS 1.2 resumption has no key exchange");
                            }
                            if resume {
                                assert_eq!(n.signature_scheme, "none", "a resumed handshake has no signature");
                            }
                        }
                        Err(why) => {
                            if !cfg!(feature = "fips") {
                                let lacks = (*group == Group::X25519MlKem768
                                    && (*version == TlsVersion::Tls12
                                        || stack == Stack::RustlsRing
                                        || (stack == Stack::OpenSsl && !openssl_has_mlkem())))
                                    || (stack == Stack::OpenSsl
                                        && *version == TlsVersion::Tls12
                                        && *cert == CertKind::EcdsaP256
                                        && *group != Group::P256);
                                assert!(lacks, "{stack:?} {p:?} unexpectedly unsupported: {why}");
                            }
                            unsupported.push(format!("{p:?}: {why}"));
                        }
                    }
                }
            }
        }
    }
    eprintln!("{stack:?}: {ran} combinations ran, {} unsupported", unsupported.len());
    for u in &unsupported {
        eprintln!("  unsupported {u}");
    }
    assert!(ran >= 8, "{stack:?}: only {ran} combinations ran");
}

#[test]
fn every_combination_rustls_aws_lc() {
    every_combination(Stack::RustlsAwsLc);
}

#[test]
fn every_combination_rustls_ring() {
    every_combination(Stack::RustlsRing);
}

#[test]
fn every_combination_openssl() {
    every_combination(Stack::OpenSsl);
}

/// Every cipher suite, both versions, with an RSA and an ECDSA certificate (TLS 1.2 suites
/// differ by certificate type).
#[test]
fn every_suite_of_every_stack() {
    for stack in Stack::ALL {
        for version in TlsVersion::ALL {
            for suite in Suite::ALL {
                for cert in [CertKind::Rsa2048, CertKind::EcdsaP256] {
                    let p = params(*version, cert, Group::P256, *suite, false);
                    match run(*stack, *stack, &p) {
                        Ok(n) => assert_eq!(n.cipher_suite, suite_id(*version, *suite, cert).iana),
                        Err(why) => assert!(
                            cfg!(feature = "fips") && *suite == Suite::Chacha20Poly1305,
                            "{stack:?} {p:?}: {why}"
                        ),
                    }
                }
            }
        }
    }
}

/// A group every stack has in both builds.
const COMMON_GROUP: Group = Group::P256;

#[test]
fn different_stacks_interoperate_in_memory() {
    for cs in Stack::ALL {
        for ss in Stack::ALL {
            if cs == ss {
                continue;
            }
            for version in TlsVersion::ALL {
                for cert in [CertKind::EcdsaP256, CertKind::Rsa2048, CertKind::Ed25519] {
                    for resume in [false, true] {
                        let p = params(*version, cert, COMMON_GROUP, Suite::Aes128Gcm, resume);
                        let n = match run(*cs, *ss, &p) {
                            Ok(n) => n,
                            // Only the FIPS build may lack one of these (Ed25519).
                            Err(why) if cfg!(feature = "fips") => {
                                eprintln!("{cs:?} -> {ss:?} {p:?}: {why}");
                                continue;
                            }
                            Err(why) => panic!("{cs:?} -> {ss:?} {p:?}: {why}"),
                        };
                        assert_eq!(n.version, version.wire_name());
                        assert_eq!(n.cipher_suite, suite_id(*version, Suite::Aes128Gcm, cert).iana);
                        assert_eq!(n.resumed, resume);
                        if !(resume && *version == TlsVersion::Tls12) {
                            assert_eq!(n.group, "p256");
                        }
                        if !resume {
                            // RSA: PSS with a hash of the server's choosing (rustls prefers
                            // SHA-512 in TLS 1.2, for one).
                            let fits = match cert {
                                // TLS 1.2 names only the hash: OpenSSL signs with SHA-384.
                                CertKind::EcdsaP256 if *version == TlsVersion::Tls12 => {
                                    n.signature_scheme.starts_with("ecdsa_secp")
                                }
                                CertKind::EcdsaP256 => n.signature_scheme == "ecdsa_secp256r1_sha256",
                                CertKind::Ed25519 => n.signature_scheme == "ed25519",
                                _ => n.signature_scheme.starts_with("rsa_pss_rsae_sha"),
                            };
                            assert!(fits, "{cs:?} -> {ss:?} {p:?}: {}", n.signature_scheme);
                        }
                    }
                }
            }
        }
    }
}

/// X25519MLKEM768 between every pair of stacks that have it (rustls with aws-lc-rs; OpenSSL
/// from 3.5, i.e. with the vendored-openssl feature), full and resumed.
#[test]
fn x25519mlkem768_interoperates_where_both_stacks_have_it() {
    let mut ran = 0;
    for cs in Stack::ALL {
        for ss in Stack::ALL {
            for resume in [false, true] {
                let p = params(TlsVersion::Tls13, CertKind::EcdsaP256, Group::X25519MlKem768, Suite::Aes128Gcm, resume);
                if let Ok(n) = run(*cs, *ss, &p) {
                    assert_eq!(n.group, "x25519mlkem768", "{cs:?} -> {ss:?}");
                    ran += 1;
                }
            }
        }
    }
    let stacks_with_it = 1 + usize::from(openssl_has_mlkem());
    assert_eq!(ran, 2 * stacks_with_it * stacks_with_it);
}

/// One transaction over TCP on 127.0.0.1: client and server in two threads; both sides see the
/// same Negotiated, and it is what was asked for.
fn tcp_transaction(cs: Stack, ss: Stack, p: &TlsParams) -> (Negotiated, Negotiated) {
    let (c, s) = stacks(cs, ss, p).unwrap_or_else(|why| panic!("{cs:?} -> {ss:?} {p:?}: {why}"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let server_thread = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        transaction_server(s.as_ref(), stream)
    });
    let client_side = transaction_client(c.as_ref(), addr);
    let server_side = server_thread.join().expect("server thread");
    let client_side = client_side.unwrap_or_else(|e| panic!("{cs:?} -> {ss:?} {p:?} client: {e}"));
    let server_side = server_side.unwrap_or_else(|e| panic!("{cs:?} -> {ss:?} {p:?} server: {e}"));
    (client_side, server_side)
}

#[test]
fn different_stacks_interoperate_over_tcp() {
    for cs in Stack::ALL {
        for ss in Stack::ALL {
            if cs == ss {
                continue;
            }
            for version in TlsVersion::ALL {
                let p = params(*version, CertKind::EcdsaP256, COMMON_GROUP, Suite::Aes256Gcm, false);
                let (client_side, server_side) = tcp_transaction(*cs, *ss, &p);
                assert_eq!(client_side.mismatch(&p), None, "{cs:?} -> {ss:?} {p:?}: {client_side:?}");
                assert_eq!(client_side, server_side, "{cs:?} -> {ss:?} {p:?}: the two sides disagree");
            }
        }
    }
}

#[test]
fn tcp_resumption_with_one_client_cache() {
    for stack in Stack::ALL {
        for version in TlsVersion::ALL {
            let p = params(*version, CertKind::Rsa2048, COMMON_GROUP, Suite::Aes128Gcm, true);
            let (c, s) = stacks(*stack, *stack, &p).expect("supported");
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("address");
            let server_thread = std::thread::spawn(move || {
                (0..2)
                    .map(|_| transaction_server(s.as_ref(), listener.accept().expect("accept").0))
                    .collect::<Vec<_>>()
            });
            let first = transaction_client(c.as_ref(), addr).expect("first");
            let second = transaction_client(c.as_ref(), addr).expect("second");
            let servers = server_thread.join().expect("server thread");
            assert!(!first.resumed, "{stack:?} {p:?}");
            assert_eq!(second.mismatch(&p), None, "{stack:?} {p:?}: {second:?}");
            assert_eq!(servers[1].as_ref().expect("server"), &second, "{stack:?} {p:?}");
        }
    }
}

/// A client asking for X25519MLKEM768 of a server that only has X25519 (P-256 where the FIPS
/// build lacks X25519) never yields a Negotiated that passes for X25519MLKEM768.
#[test]
fn no_silent_fallback_from_x25519mlkem768() {
    for cs in Stack::ALL {
        let asked = params(TlsVersion::Tls13, CertKind::EcdsaP256, Group::X25519MlKem768, Suite::Aes128Gcm, false);
        let id = identity(asked.cert);
        let c = match client(*cs, &id, &asked) {
            Ok(c) => c,
            Err(BackendError::Unsupported(_)) => continue,
            Err(e) => panic!("{cs:?}: {e}"),
        };
        for ss in Stack::ALL {
            let s = [Group::X25519, Group::P256]
                .iter()
                .find_map(|g| server(*ss, &id, &TlsParams { group: *g, ..asked }).ok())
                .expect("a classical server");
            match transaction_in_memory(c.as_ref(), s.as_ref()) {
                Err(e) => eprintln!("{cs:?} -> {ss:?}: fails as it should: {e}"),
                Ok(out) => {
                    let why = out.negotiated.mismatch(&asked);
                    assert!(why.is_some(), "{cs:?} -> {ss:?}: {:?} passes for x25519mlkem768", out.negotiated);
                }
            }
        }
    }
}

#[test]
fn mismatch_names_each_difference() {
    let p = params(TlsVersion::Tls13, CertKind::EcdsaP256, Group::X25519MlKem768, Suite::Aes128Gcm, false);
    let good = Negotiated {
        version: "TLSv1.3".into(),
        cipher_suite: "TLS_AES_128_GCM_SHA256".into(),
        group: "x25519mlkem768".into(),
        signature_scheme: "ecdsa_secp256r1_sha256".into(),
        resumed: false,
    };
    assert_eq!(good.mismatch(&p), None);
    let g = Negotiated { group: "x25519".into(), ..good.clone() };
    assert_eq!(g.mismatch(&p).as_deref(), Some("negotiated group x25519, asked for x25519mlkem768"));
    let v = Negotiated { version: "TLSv1.2".into(), ..good.clone() };
    assert!(v.mismatch(&p).unwrap().contains("version TLSv1.2"));
    let s = Negotiated { cipher_suite: "TLS_AES_256_GCM_SHA384".into(), ..good.clone() };
    assert!(s.mismatch(&p).unwrap().contains("TLS_AES_256_GCM_SHA384"));
    let k = Negotiated { signature_scheme: "rsa_pss_rsae_sha256".into(), ..good.clone() };
    assert!(k.mismatch(&p).unwrap().contains("does not fit a ecdsa-p256"));
    let r = Negotiated { resumed: true, signature_scheme: "none".into(), ..good.clone() };
    assert!(r.mismatch(&p).unwrap().contains("resumed"));
    assert_eq!(r.mismatch(&TlsParams { resume: true, ..p }), None);
    // TLS 1.2 resumption has no key exchange: its group is not checked.
    let p12 = params(TlsVersion::Tls12, CertKind::Rsa2048, Group::X25519, Suite::Aes128Gcm, true);
    let r12 = Negotiated {
        version: "TLSv1.2".into(),
        cipher_suite: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
        group: "none".into(),
        signature_scheme: "none".into(),
        resumed: true,
    };
    assert_eq!(r12.mismatch(&p12), None);
    assert!(Negotiated { group: "none".into(), ..good }.mismatch(&p).is_some());
}

#[test]
fn names_round_trip() {
    fn check<T: Copy + PartialEq + std::fmt::Debug>(all: &[T], names: &[&str], parse: fn(&str) -> Option<T>, name: fn(&T) -> &'static str) {
        assert_eq!(all.len(), names.len());
        for (v, n) in all.iter().zip(names) {
            assert_eq!(parse(n), Some(*v));
            assert_eq!(name(v), *n);
        }
        assert_eq!(parse("nonsense"), None);
    }
    check(TlsVersion::ALL, TlsVersion::NAMES, TlsVersion::parse, TlsVersion::name);
    check(CertKind::ALL, CertKind::NAMES, CertKind::parse, CertKind::name);
    check(Group::ALL, Group::NAMES, Group::parse, Group::name);
    check(Suite::ALL, Suite::NAMES, Suite::parse, Suite::name);
    check(Stack::ALL, Stack::NAMES, Stack::parse, Stack::name);
    assert_eq!(TlsVersion::parse("1.3"), Some(TlsVersion::Tls13));
    assert_eq!(Group::parse("x25519mlkem768"), Some(Group::X25519MlKem768));
    for s in Stack::ALL {
        assert_eq!(Stack::for_backend(s.backend()), Some(*s));
    }
    assert_eq!(Stack::for_backend("rustcrypto"), None);
}

#[test]
fn memory_pipe_moves_bytes_and_would_block_when_empty() {
    let (mut a, mut b) = memory_pair();
    let mut buf = [0u8; 8];
    assert_eq!(b.read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    a.write_all(b"hello").unwrap();
    b.write_all(b"yo").unwrap();
    assert_eq!(b.read(&mut buf[..3]).unwrap(), 3);
    assert_eq!(&buf[..3], b"hel");
    assert_eq!(b.read(&mut buf).unwrap(), 2);
    assert_eq!(&buf[..2], b"lo");
    assert_eq!(a.read(&mut buf).unwrap(), 2);
    assert_eq!(&buf[..2], b"yo");
    drop(a);
    assert_eq!(b.read(&mut buf).unwrap(), 0, "end of stream once the other end is gone");
}

/// The identities are complete and consistent (the leaf verifies against the CA, names
/// localhost, and matches the key), and generating them leaves the filesystem alone: the
/// temporary and current directories are unchanged, and the generating code has no file calls.
#[test]
fn identity_is_consistent_and_made_in_memory() {
    use openssl::pkey::PKey;
    use openssl::x509::X509;
    let listing = |dir: std::path::PathBuf| -> Vec<_> {
        let mut v: Vec<_> = std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
        v.sort();
        v
    };
    let before = (listing(std::env::temp_dir()), listing(std::env::current_dir().unwrap()));
    let ids: Vec<Identity> = [CertKind::EcdsaP256, CertKind::Ed25519, CertKind::Rsa2048]
        .iter()
        .map(|k| Identity::generate(*k).expect("generate"))
        .collect();
    let after = (listing(std::env::temp_dir()), listing(std::env::current_dir().unwrap()));
    // What appeared meanwhile (a key file would); the storage tests of this same test binary run
    // beside this one and make and remove their scratch directories in the temporary directory.
    let added: Vec<_> = after.0.iter().chain(after.1.iter())
        .filter(|p| !before.0.contains(p) && !before.1.contains(p))
        .filter(|p| !p.file_name().map_or(false, |n| n.to_string_lossy().starts_with("cryptoperf-storage-test-")))
        .collect();
    assert!(added.is_empty(), "generating identities changed the filesystem: {added:?}");
    let source = include_str!("identity.rs");
    let certs = &source[source.find("mod certs {").unwrap()..];
    for forbidden in ["std::fs", "File", "tempfile", "Path", "env::"] {
        assert!(!certs.contains(forbidden), "certificate generation mentions {forbidden}");
    }
    for id in &ids {
        let ca = X509::from_der(&id.ca_der).unwrap();
        assert_eq!(id.cert_chain_der.len(), 1);
        let leaf = X509::from_der(&id.cert_chain_der[0]).unwrap();
        assert!(leaf.verify(&ca.public_key().unwrap()).unwrap(), "{:?}: leaf not signed by the CA", id.kind);
        assert!(ca.verify(&ca.public_key().unwrap()).unwrap());
        let sans: Vec<String> =
            leaf.subject_alt_names().unwrap().iter().filter_map(|n| n.dnsname().map(str::to_string)).collect();
        assert_eq!(sans, vec!["localhost".to_string()]);
        let key = PKey::private_key_from_pkcs8(&id.key_pkcs8_der).unwrap();
        assert!(leaf.public_key().unwrap().public_eq(&key), "{:?}: key does not match the leaf", id.kind);
    }
    assert_ne!(ids[0].ca_der, Identity::generate(CertKind::EcdsaP256).unwrap().ca_der, "fresh keys each time");
}

/// A transport that keeps a copy of every byte read through it.
struct Tap {
    inner: MemStream,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Read for Tap {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.seen.lock().unwrap().extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl Write for Tap {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Transport for Tap {}

/// The lengths of the TLS records carrying `len` bytes the server sends after the handshake,
/// as the client's transport saw them.
fn server_records(stack: Stack, p: &TlsParams, len: usize) -> Vec<usize> {
    let (c, s) = stacks(stack, stack, p).expect("supported");
    let (client_end, server_end) = memory_pair();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut cs = c.connect(Box::new(Tap { inner: client_end, seen: seen.clone() })).unwrap();
    let mut ss = s.accept(Box::new(server_end)).unwrap();
    let (mut c_done, mut s_done) = (false, false);
    for _ in 0..MAX_ROUNDS {
        c_done = c_done || cs.handshake().unwrap();
        s_done = s_done || ss.handshake().unwrap();
    }
    assert!(c_done && s_done);
    // Whatever the client has not read yet of the handshake, it reads now.
    let mut buf = vec![0u8; len];
    assert_eq!(cs.read(&mut buf).unwrap(), None);
    let start = seen.lock().unwrap().len();
    ss.write_all(&vec![7u8; len]).unwrap();
    let mut got = 0;
    while got < len {
        got += cs.read(&mut buf[got..]).unwrap().expect("data");
    }
    assert!(buf.iter().all(|b| *b == 7));
    let seen = seen.lock().unwrap();
    let mut records = Vec::new();
    let mut i = start;
    while i + 5 <= seen.len() {
        assert_eq!(seen[i], 23, "application data records only");
        let n = u16::from_be_bytes([seen[i + 3], seen[i + 4]]) as usize;
        records.push(n);
        i += 5 + n;
    }
    assert_eq!(i, seen.len(), "whole records");
    records
}

#[test]
fn record_size_limits_what_each_record_carries() {
    for stack in Stack::ALL {
        for version in TlsVersion::ALL {
            let p = params(*version, CertKind::EcdsaP256, Group::P256, Suite::Aes128Gcm, false);
            let default = server_records(*stack, &p, 4000);
            assert_eq!(default.len(), 1, "{stack:?} {version:?}: {default:?}");
            let small = server_records(*stack, &TlsParams { record_bytes: Some(512), ..p }, 4000);
            // 4000 bytes in records of at most 512 plaintext bytes (+ AEAD overhead).
            assert_eq!(small.len(), 8, "{stack:?} {version:?}: {small:?}");
            assert!(small.iter().all(|n| *n <= 512 + 32), "{stack:?} {version:?}: {small:?}");
        }
    }
}

#[test]
fn record_size_is_honoured_and_checked() {
    for stack in Stack::ALL {
        let p = TlsParams { record_bytes: Some(512), ..params(TlsVersion::Tls13, CertKind::EcdsaP256, Group::P256, Suite::Aes128Gcm, false) };
        run(*stack, *stack, &p).unwrap_or_else(|why| panic!("{stack:?}: {why}"));
        let bad = TlsParams { record_bytes: Some(100), ..p };
        assert!(matches!(server(*stack, &identity(p.cert), &bad), Err(BackendError::Unsupported(_))));
    }
}

#[test]
fn fips_is_reported_for_the_aws_lc_stack_exactly_in_the_fips_build() {
    let p = params(TlsVersion::Tls13, CertKind::EcdsaP256, Group::P256, Suite::Aes128Gcm, false);
    let id = identity(p.cert);
    let c = client(Stack::RustlsAwsLc, &id, &p).expect("client");
    let s = server(Stack::RustlsAwsLc, &id, &p).expect("server");
    assert_eq!(c.fips(), cfg!(feature = "fips"));
    assert_eq!(s.fips(), cfg!(feature = "fips"));
    let ring = client(Stack::RustlsRing, &id, &p).expect("ring client");
    assert!(!ring.fips());
    if cfg!(feature = "fips") {
        let chacha = TlsParams { suite: Suite::Chacha20Poly1305, ..p };
        assert!(matches!(client(Stack::RustlsAwsLc, &id, &chacha), Err(BackendError::Unsupported(_))));
        let x25519 = TlsParams { group: Group::X25519, ..p };
        assert!(matches!(server(Stack::RustlsAwsLc, &id, &x25519), Err(BackendError::Unsupported(_))));
    }
}

/// The in-memory handshake rate: `cargo test --release workloads::tls::tests::rate -- --ignored --nocapture`.
#[test]
#[ignore]
fn rate() {
    for (cert, group) in [(CertKind::EcdsaP256, Group::X25519), (CertKind::EcdsaP256, Group::P256), (CertKind::Rsa2048, Group::X25519), (CertKind::EcdsaP256, Group::X25519MlKem768)] {
        for stack in Stack::ALL {
            let p = params(TlsVersion::Tls13, cert, group, Suite::Aes128Gcm, false);
            let Ok((c, s)) = stacks(*stack, *stack, &p) else { continue };
            let start = std::time::Instant::now();
            let (mut n, mut cns, mut sns) = (0u64, 0u64, 0u64);
            while start.elapsed().as_secs_f64() < 2.0 {
                let out = transaction_in_memory(c.as_ref(), s.as_ref()).expect("transaction");
                n += 1;
                cns += out.client_cpu_ns;
                sns += out.server_cpu_ns;
            }
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "{:<14} TLS1.3 {:<10} {:<7} {:>7.0} transactions/s  client {:>6.1} µs  server {:>6.1} µs CPU each",
                stack.name(),
                cert.name(),
                group.name(),
                n as f64 / secs,
                cns as f64 / n as f64 / 1e3,
                sns as f64 / n as f64 / 1e3
            );
        }
    }
}
