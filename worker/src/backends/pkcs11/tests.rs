//! The backend against a SoftHSM2 token made for the test (`softhsm2-util`, Debian's
//! `softhsm2`; the test says so and passes without checking anything when it is not
//! installed — .ci/run installs it, so CI always runs it). One test function: the token is
//! opened once per process.
use super::*;
use crate::kat;
use crate::ops::{Op, Params, RawParams};
use std::process::Command;

const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";

/// A SoftHSM2 configuration and token in a fresh directory; the env set for this process.
fn softhsm_token() -> Option<tempfile::TempDir> {
    if !std::path::Path::new(MODULE).exists() {
        eprintln!("SoftHSM2 is not installed ({MODULE}); apt-get install softhsm2 to run this test");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("softhsm2.conf");
    let tokens = dir.path().join("tokens");
    std::fs::create_dir(&tokens).unwrap();
    std::fs::write(&conf, format!("directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n", tokens.display())).unwrap();
    std::fs::write(dir.path().join("pin"), "4321\n").unwrap();
    let out = Command::new("softhsm2-util")
        .args(["--init-token", "--free", "--label", "kat-token", "--pin", "4321", "--so-pin", "87654321"])
        .env("SOFTHSM2_CONF", &conf)
        .output()
        .expect("softhsm2-util runs");
    assert!(out.status.success(), "softhsm2-util: {}", String::from_utf8_lossy(&out.stderr));
    std::env::set_var("SOFTHSM2_CONF", &conf);
    std::env::set_var(MODULE_ENV, MODULE);
    std::env::set_var(TOKEN_ENV, "kat-token");
    std::env::set_var(PIN_FILE_ENV, dir.path().join("pin"));
    Some(dir)
}

fn case(name: &str, raw: RawParams) -> (Op, Params) {
    let op = Op::parse(name).unwrap();
    (op, Params::resolve(op, &raw).unwrap())
}

/// Every operation the token has passes its known-answer test and its cross-checks with
/// every software library (a signature made on the token verifies with them, theirs on
/// the token); what SoftHSM2 lacks is unsupported, naming the mechanism or key size.
#[test]
fn softhsm_token_passes_the_known_answers_and_cross_checks() {
    let Some(_dir) = softhsm_token() else { return };
    let b = Pkcs11Token;
    b.open().expect("the token opens");
    assert!(b.info().library.contains("kat-token"), "{}", b.info().library);
    let pss = || RawParams { padding: Some("pss".into()), ..Default::default() };
    let ops = [
        case("sha256", RawParams::default()),
        case("sha384", RawParams::default()),
        case("hmac-sha256", RawParams::default()),
        case("aes-128-gcm-seal", RawParams::default()),
        case("aes-256-gcm-open", RawParams::default()),
        case("rsa2048-sign", RawParams::default()),
        case("rsa2048-sign", pss()),
        case("rsa2048-verify", RawParams::default()),
        case("rsa3072-sign", RawParams::default()),
        case("ecdsa-p256-sign", RawParams::default()),
        case("ecdsa-p256-verify", RawParams::default()),
        case("ecdsa-p384-sign", RawParams::default()),
    ];
    for (op, params) in ops {
        let v = kat::validate(&b, op, &params).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        assert!(v.passed(), "{op:?} {params:?}: {:?}", v.failure());
        assert!(matches!(v.kat, kat::KatStatus::Pass), "{op:?}: {}", v.kat_source);
        let passed = v.cross_checks.iter().filter(|c| c.status == "pass").count();
        assert!(passed >= 2, "{op:?}: cross-checked with {passed} libraries: {:?}", v.cross_checks.iter().map(|c| (&c.with, c.status)).collect::<Vec<_>>());
    }
    // What SoftHSM2 lacks is unsupported, with its reason.
    let (op, params) = case("sha3-256", RawParams::default());
    assert!(matches!(kat::validate(&b, op, &params), Err(BackendError::Unsupported(_))));
    match b.hmac(DigestAlg::Sha256, b"Jefe") {
        Err(BackendError::Unsupported(why)) => assert!(why.contains("keys of 32 bytes or more"), "{why}"),
        other => panic!("a 4-byte HMAC key: {:?}", other.err()),
    }
    match b.aead(AeadAlg::ChaCha20Poly1305, &[7; 32]) {
        Err(BackendError::Unsupported(why)) => assert!(why.contains("AES-GCM"), "{why}"),
        other => panic!("ChaCha20-Poly1305: {:?}", other.err()),
    }
    workloads_with_the_key_on_the_token();
    keys_the_token_generates();
}

/// CRYPTOPERF_PKCS11_KEYS=generate (a token that refuses imported private keys): signing runs
/// with key pairs the token generates; their signatures have no known answer, so the KAT is not
/// applicable and the software libraries check them with the public key the token gives; an
/// IKE exchange signs with such a key; a TLS server key (its certificate is for another key)
/// is unsupported, said; an unknown value stops the token's opening.
fn keys_the_token_generates() {
    use crate::workloads::ike_phase1::{self, IkeGroup, IkeParams};
    use crate::workloads::tls::{backend_key::BackendKey, CertKind, Identity};
    std::env::set_var(KEYS_ENV, "generate");
    let b = Pkcs11Token;
    assert!(b.generates_signing_keys().is_some());
    let pss = || RawParams { padding: Some("pss".into()), ..Default::default() };
    for (op, params) in [case("rsa2048-sign", RawParams::default()), case("rsa2048-sign", pss()), case("ecdsa-p256-sign", RawParams::default())] {
        let v = kat::validate(&b, op, &params).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        assert!(matches!(v.kat, kat::KatStatus::NotApplicable(_)), "{op:?}: {}", v.kat);
        let passed = v.cross_checks.iter().filter(|c| c.status == "pass").count();
        assert!(v.passed() && passed >= 2, "{op:?}: {:?}", v.cross_checks.iter().map(|c| (&c.with, c.status, &c.detail)).collect::<Vec<_>>());
        let mut timed = crate::ops::prepare::prepare(&b, op, &params).unwrap();
        timed().unwrap();
    }
    let generated = b.sig_keygen(SigAlg::Rsa { bits: 2048, digest: DigestAlg::Sha256, padding: RsaPadding::Pkcs1 }, None).unwrap();
    let other = b.sig_keygen(SigAlg::Rsa { bits: 2048, digest: DigestAlg::Sha256, padding: RsaPadding::Pkcs1 }, None).unwrap();
    assert_ne!(generated.public, other.public, "each key pair is fresh");
    let p = IkeParams { group: IkeGroup::Ecp256, rsa_bits: 2048, digest: DigestAlg::Sha256, stack: Some("openssl") };
    let v = ike_phase1::validate(&b, &p).unwrap();
    assert!(v.passed(), "{:?}", v.failure());
    let id = Identity::generate(CertKind::EcdsaP256).unwrap();
    assert!(matches!(BackendKey::open("pkcs11", &id), Err(BackendError::Unsupported(why)) if why.contains("generates")));
    std::env::set_var(KEYS_ENV, "sometimes");
    assert!(matches!(b.open(), Err(BackendError::Failed(why)) if why.contains("import (the default) and generate")));
    std::env::remove_var(KEYS_ENV);
}

/// The workloads with their private key on the token (same process, so same token): a TLS
/// server whose handshake signature the token makes, verified by every client
/// implementation; an IKE phase 1 whose AUTH signature the token makes, validated.
fn workloads_with_the_key_on_the_token() {
    use crate::workloads::ike_phase1::{self, IkeGroup, IkeParams};
    use crate::workloads::tls::{self, backend_key::BackendKey, CertKind, Group, Identity, Stack, Suite, TlsParams, TlsVersion};
    for cert in [CertKind::Rsa2048, CertKind::EcdsaP256] {
        let mut id = Identity::generate(cert).unwrap();
        let key = BackendKey::open("pkcs11", &id).unwrap_or_else(|e| panic!("{cert:?}: {e}"));
        assert!(key.checked.contains("the server key on pkcs11"), "{}", key.checked);
        id.signing = Some(std::sync::Arc::new(key));
        for version in [TlsVersion::Tls12, TlsVersion::Tls13] {
            let p = TlsParams { version, cert, group: Group::P256, suite: Suite::Aes128Gcm, resume: false, record_bytes: None, fallback_group: None };
            let server = tls::server(Stack::RustlsAwsLc, &id, &p).unwrap();
            for client in Stack::ALL.iter().copied() {
                let c = tls::client(client, &id, &p).unwrap();
                let o = tls::transaction_in_memory(&*c, &*server).unwrap_or_else(|e| panic!("{cert:?} {version:?} {client:?}: {e}"));
                assert_eq!(o.negotiated.mismatch(&p), None);
            }
        }
    }
    // Ed25519 is not a PKCS#11 2.40 mechanism of this backend: unsupported, said.
    let ed = Identity::generate(CertKind::Ed25519).unwrap();
    assert!(matches!(BackendKey::open("pkcs11", &ed), Err(BackendError::Unsupported(_))));
    let p = IkeParams { group: IkeGroup::Ecp256, rsa_bits: 2048, digest: DigestAlg::Sha256, stack: Some("openssl") };
    let v = ike_phase1::validate(&Pkcs11Token, &p).unwrap();
    assert!(v.passed(), "{:?}", v.failure());
    assert!(matches!(v.kat, kat::KatStatus::Pass), "{}", v.kat_source);
    let mut exchange = ike_phase1::prepare(&Pkcs11Token, &p).unwrap();
    exchange().unwrap();
    // Without a stack, the token has no key agreement: unsupported, said.
    let alone = IkeParams { stack: None, ..p };
    assert!(matches!(ike_phase1::prepare(&Pkcs11Token, &alone), Err(BackendError::Unsupported(_))));
}

#[test]
fn ecdsa_signatures_convert_between_raw_and_der() {
    let raw: Vec<u8> = (1..=64).collect();
    let der = ecdsa_der(&raw, 32).unwrap();
    assert_eq!(ecdsa_raw(&der, 32).unwrap(), raw);
    assert!(ecdsa_der(&raw[..63], 32).is_err());
    assert!(ecdsa_raw(b"not DER", 32).is_none());
}
