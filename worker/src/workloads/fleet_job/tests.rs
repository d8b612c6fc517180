//! `fleet-job`'s tests.

use crate::workloads::base::allowed_cpus;
use crate::workloads::tls::{self, Authority, CertKind, Group, Identity, NamedIdentity, Stack, Suite, TlsParams, TlsVersion,
                            Usage};
use crate::backends::{self, Backend};
use crate::ops::DigestAlg;
use serde_json::{json, Map, Value};
use std::net::TcpStream;
use super::content::*;
use super::coordinator::*;
use super::spec::*;
use super::wire::*;

fn params(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn kinds_set_phases_and_sizes_and_the_study_may_override_them() {
    let s = parse("aws-lc", &params(json!({"job": "appconfig"}))).unwrap();
    assert_eq!(s.phases, vec![Phase::Connect, Phase::Push, Phase::Report]);
    assert_eq!((s.items, s.item_bytes, s.auth), (100, 512, Auth::Hmac));
    let s = parse("aws-lc", &params(json!({}))).unwrap();
    assert_eq!(s.kind.name, "audit");
    assert_eq!((s.checks, s.cap, s.slices, s.agents), (192, 20, 1, 2));
    assert_eq!(s.sign_digest, s.digest);
    let s = parse("openssl", &params(json!({"job": "remediate", "item_bytes": 4096, "phases": "connect,push,checks,report", "checks": 3, "digest": "sha1", "sign_digest": "sha256"}))).unwrap();
    assert_eq!((s.items, s.item_bytes, s.auth, s.checks), (1, 4096, Auth::Sign, 3));
    assert_eq!((s.digest, s.sign_digest), (DigestAlg::Sha1, DigestAlg::Sha256));
}

#[test]
fn bad_params_get_one_line_each() {
    let cases = [
        (json!({"job": "deploy"}), "unknown job 'deploy'"),
        (json!({"phases": "push,report"}), "must start with connect"),
        (json!({"phases": "connect,connect"}), "lists a phase twice"),
        (json!({"phases": "connect,dance"}), "unknown phase 'dance'"),
        (json!({"cap": 0}), "cap must be"),
        (json!({"slices": 65}), "slices must be"),
        (json!({"inject_close": "a,b"}), "inject_close must list target numbers"),
        (json!({"job": "appconfig", "items": 0}), "pushes nothing"),
        (json!({"items": 1000, "item_bytes": 1048576, "phases": "connect,push"}), "at most"),
        (json!({"sign_digest": "md5"}), "unknown sign_digest 'md5'"),
    ];
    for (p, want) in cases {
        let e = parse("aws-lc", &params(p.clone())).err().unwrap_or_default();
        assert!(e.contains(want), "{p}: {e}");
        assert!(!e.contains('\n'));
    }
    assert!(parse("rustcrypto", &Map::new()).unwrap_err().contains("no TLS implementation"));
}

#[test]
fn placement_keeps_agents_off_the_slices_cpus_where_it_can() {
    let n = allowed_cpus().len();
    let (s, a, note) = placement(1, 2);
    if n >= 2 {
        assert!(s[0].is_some() && a.iter().all(|c| c.is_some() && *c != s[0]), "{note}");
    } else {
        assert!(note.starts_with("not pinned"), "{note}");
    }
    let (s, a, note) = placement(n, 2);
    assert!(s.iter().chain(&a).all(Option::is_none) && note.starts_with("not pinned"), "{note}");
}

#[test]
fn content_is_deterministic_and_differs_per_seed() {
    assert_eq!(file(3, 100), file(3, 100));
    assert_ne!(file(3, 100), file(4, 100));
    assert_eq!(file(3, 4096).len(), 4096);
    assert_ne!(hmac_key(1), hmac_key(2));
    assert_eq!(target_name(42), "t00042.fleet.test");
}

/// The check files' digests by every backend equal RustCrypto's (the baseline), and a
/// tampered file is detected: what the management side compares.
#[test]
fn file_digests_match_the_second_library_and_a_tampered_file_does_not() {
    let reference = backends::rustcrypto::RustCrypto;
    for alg in [DigestAlg::Sha1, DigestAlg::Sha256] {
        let mut r = reference.digest(alg).unwrap();
        for name in ["openssl", "aws-lc", "ring"] {
            let b = backends::by_name(name).unwrap();
            let Ok(mut d) = b.digest(alg) else { continue };
            for j in 0..4 {
                let (mut a, mut want) = (Vec::new(), Vec::new());
                d.digest(&file(j, 4096), &mut a).unwrap();
                r.digest(&file(j, 4096), &mut want).unwrap();
                assert_eq!(a, want, "{name} {alg:?} file {j}");
            }
            let mut f = file(0, 4096);
            f[0] ^= 1;
            let (mut a, mut want) = (Vec::new(), Vec::new());
            d.digest(&f, &mut a).unwrap();
            r.digest(&file(0, 4096), &mut want).unwrap();
            assert_ne!(a, want);
        }
    }
}

/// Every key kind's pool keys sign with every backend that has the scheme, and the public
/// key taken from a certificate verifies it (what `report` does).
#[test]
fn pool_keys_sign_and_certificates_carry_their_public_keys() {
    for kind in [CertKind::Rsa2048, CertKind::EcdsaP256] {
        let ca = Authority::new(kind, CA_KEY, "test CA").unwrap();
        let leaf = ca.issue(target_key(7), &target_name(7), Usage::Server).unwrap();
        let public = public_of_cert(&leaf).unwrap();
        let m = key_material(kind, target_key(7)).unwrap();
        assert_eq!(public, m.public);
        let alg = sig_alg(kind, DigestAlg::Sha256);
        let b = backends::by_name("aws-lc").unwrap();
        let sig = b.signer(alg, &m.pair()).unwrap().sign(b"report").unwrap();
        assert!(b.verifier(alg, &public).unwrap().verify(b"report", &sig).unwrap());
        assert!(Authority::from_der(kind, CA_KEY, &ca.der()).is_ok());
        assert!(Authority::from_der(kind, MANAGEMENT_KEY, &ca.der()).is_err());
    }
}

/// Mutual TLS over TCP between every pair of stacks: the target named by SNI is the one
/// presented, the client certificate is required, and a certificate from another CA fails.
#[test]
fn mutual_tls_picks_the_identity_by_name_and_requires_the_client_certificate() {
    let p = TlsParams { version: TlsVersion::Tls13, cert: CertKind::EcdsaP256, group: Group::P256, suite: Suite::Aes128Gcm,
                        resume: false, record_bytes: None, fallback_group: None };
    let ca = Authority::new(p.cert, CA_KEY, "test CA").unwrap();
    let rogue = Authority::new(p.cert, tls::POOL_SIZE - 1, "rogue CA").unwrap();
    let ids: Vec<_> = (0..3)
        .map(|i| {
            let issuer = if i == 2 { &rogue } else { &ca };
            NamedIdentity { name: target_name(i), chain_der: vec![issuer.issue(target_key(i), &target_name(i), Usage::Server).unwrap()], key_index: target_key(i) }
        })
        .collect();
    let mgmt = ca.identity(ca.issue(MANAGEMENT_KEY, MANAGEMENT, Usage::Client).unwrap(), MANAGEMENT_KEY);
    let stranger = rogue.identity(rogue.issue(MANAGEMENT_KEY, MANAGEMENT, Usage::Client).unwrap(), MANAGEMENT_KEY);
    for ss in Stack::ALL {
        for cs in Stack::ALL {
            let server = tls::mutual_server(*ss, &ca.der(), &ids, &p).unwrap();
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let srv = server.clone();
            let h = std::thread::spawn(move || {
                (0..3)
                    .map(|_| {
                        let (stream, _) = listener.accept().unwrap();
                        let mut s = srv.accept(Box::new(stream)).unwrap();
                        let ok = s.handshake().and_then(|_| recv(&mut *s, 1)).is_ok();
                        (ok, s.peer_certificate().is_some())
                    })
                    .collect::<Vec<_>>()
            });
            let attempt = |id: &Identity, name: &str| -> Result<Vec<u8>, String> {
                let client = tls::mutual_client(*cs, id, &p).unwrap();
                let stream = TcpStream::connect(addr).unwrap();
                let mut s = client.connect_to(Box::new(stream), name)?;
                s.handshake()?;
                s.write_all(b"x")?;
                let cert = s.peer_certificate().ok_or("no certificate")?;
                // TLS 1.3: the server's verdict on the client certificate arrives after the
                // client's handshake completed; reading surfaces it.
                let mut b = [0u8; 1];
                let _ = s.read(&mut b);
                Ok(cert)
            };
            let what = format!("{cs:?} client, {ss:?} server");
            let cert = attempt(&mgmt, &target_name(1)).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(cert, ids[1].chain_der[0], "{what}: SNI chose another identity");
            let bad = attempt(&mgmt, &target_name(2));
            assert!(bad.is_err(), "{what}: a certificate from another CA was accepted");
            let _ = attempt(&stranger, &target_name(0));
            let seen = h.join().unwrap();
            assert_eq!(seen[0], (true, true), "{what}");
            assert!(!seen[2].0, "{what}: a client certificate from another CA was accepted");
        }
    }
}


// ---- the latency model ------------------------------------------------------------------------

use super::latency::{Dist, Latency};

#[test]
fn latency_distributions_parse_in_every_form_and_refuse_the_rest_in_one_line() {
    let d = |v: Value| Dist::parse("rtt_ms", &v);
    assert_eq!(d(json!(20)).unwrap(), Dist::Fixed(20.0));
    assert_eq!(d(json!("fixed:2.5")).unwrap(), Dist::Fixed(2.5));
    assert_eq!(d(json!("7")).unwrap(), Dist::Fixed(7.0));
    assert_eq!(d(json!("uniform:10-30")).unwrap(), Dist::Uniform(10.0, 30.0));
    assert_eq!(d(json!("lognormal:p50=20,p99=200")).unwrap(), Dist::LogNormal { p50: 20.0, p99: 200.0 });
    for (bad, why) in [
        (json!("gauss:3"), "is 'gauss:3'"),
        (json!("uniform:30-10"), "is not a range"),
        (json!("uniform:10"), "has no range"),
        (json!("lognormal:p50=20"), "needs both p50 and p99"),
        (json!("lognormal:p50=20,p99=10"), "is not 0 < p50 <= p99"),
        (json!("lognormal:p50=20,p90=30"), "not p50=X or p99=Y"),
        (json!(-1), "outside 0.."),
        (json!(true), "must be a number or a string"),
    ] {
        let e = d(bad.clone()).unwrap_err();
        assert!(e.starts_with("rtt_ms ") && e.contains(why) && e.contains("lognormal:p50=20,p99=200") && !e.contains('\n'), "{bad}: {e}");
    }
    // through the request's parser, with the parameter named
    let e = parse("aws-lc", &params(json!({"target_work_ms": "often"}))).unwrap_err();
    assert!(e.starts_with("target_work_ms is 'often'"), "{e}");
}

#[test]
fn a_targets_draws_are_the_same_in_every_run_and_differ_between_targets() {
    let spec = parse("aws-lc", &params(json!({"rtt_ms": "lognormal:p50=20,p99=200", "target_work_ms": "uniform:1-3",
                                               "manager_cpu_ms": 2}))).unwrap();
    let a = spec.times_of(7);
    assert_eq!(a, spec.times_of(7));
    assert_ne!(a.wait_ns, spec.times_of(8).wait_ns);
    assert_eq!(a.manager_cpu_ns, 2_000_000);
    // audit: connect (2 round trips), checks (1 + 192 checks of work), report (1)
    assert_eq!(a.wait_ns.len(), 3);
    assert!(a.wait_ns[1] >= 192 * 1_000_000 && a.wait_ns[1] <= 192 * 3_000_000 + 600_000_000_000, "{a:?}");
    // fixed: exactly the round trips each phase waits for
    let spec = parse("aws-lc", &params(json!({"rtt_ms": 10}))).unwrap();
    assert_eq!(spec.times_of(0).wait_ns, vec![20_000_000, 10_000_000, 10_000_000]);
    assert_eq!(spec.times_of(0).manager_cpu_ns, 0);
    // off: no waits, and the result says null
    let spec = parse("aws-lc", &params(json!({}))).unwrap();
    assert_eq!(spec.latency, Latency::default());
    assert_eq!(spec.times_of(3).wait_ns, vec![0, 0, 0]);
    assert!(spec.latency.describe().is_null());
}

#[test]
fn a_lognormal_draws_its_median_and_p99() {
    let spec = parse("aws-lc", &params(json!({"job": "appconfig", "phases": "connect", "rtt_ms": "lognormal:p50=20,p99=200"}))).unwrap();
    // connect waits two round trips; take many targets' first round trip through the model
    let mut one: Vec<f64> = (0..20_000).map(|t| {
        let l = Latency { rtt: spec.latency.rtt.clone(), ..Latency::default() };
        l.for_target(t, &[Phase::Report], 0, 0).wait_ns[0] as f64 / 1e6
    }).collect();
    one.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (p50, p99) = (one[10_000], one[19_800]);
    assert!((p50 / 20.0 - 1.0).abs() < 0.05, "p50 {p50}");
    assert!((p99 / 200.0 - 1.0).abs() < 0.15, "p99 {p99}");
}

#[test]
fn burning_manager_cpu_takes_that_much_of_the_threads_cpu() {
    let took = super::latency::burn(20_000_000);
    assert!((20_000_000..60_000_000).contains(&took), "{took}");
    assert_eq!(super::latency::burn(0), 0);
}
