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
fn the_planned_wait_is_the_schedule_of_the_targets_waits_on_cap_threads_per_slice() {
    // fixed 10 ms round trips; connect (2) + report (1) = 30 ms a target
    let l = Latency { rtt: Some(Dist::Fixed(10.0)), ..Latency::default() };
    let phases = [Phase::Connect, Phase::Report];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(l.planned_wait_s(10, 1, 5, &phases, 0, 0), 0.060));  // two rounds of five
    assert!(close(l.planned_wait_s(10, 2, 5, &phases, 0, 0), 0.030));  // five each, at once
    assert!(close(l.planned_wait_s(11, 1, 5, &phases, 0, 0), 0.090));  // one left for a third round
    assert!(close(l.planned_wait_s(1, 1, 20, &phases, 0, 0), 0.030));
    // target work: 0.5 ms per item pushed, 4 items
    let w = Latency { target_work: Some(Dist::Fixed(0.5)), ..Latency::default() };
    assert!(close(w.planned_wait_s(2, 1, 1, &[Phase::Push], 4, 0), 0.004));
    // a lognormal's: the sum of the very draws a run makes, at one thread
    let ln = Latency { rtt: Some(Dist::LogNormal { p50: 5.0, p99: 20.0 }), ..Latency::default() };
    let drawn: u64 = (0..100).map(|t| ln.for_target(t, &phases, 0, 0).wait_ns.iter().sum::<u64>()).sum();
    assert!(close(ln.planned_wait_s(100, 1, 1, &phases, 0, 0), drawn as f64 / 1e9));
    assert_eq!(Latency::default().planned_wait_s(1000, 1, 20, &phases, 0, 0), 0.0);
}

#[test]
fn burning_manager_cpu_takes_that_much_of_the_threads_cpu() {
    let took = super::latency::burn(20_000_000);
    assert!((20_000_000..60_000_000).contains(&took), "{took}");
    assert_eq!(super::latency::burn(0), 0);
}

#[test]
fn a_sub_job_runs_one_slice_and_its_share_of_the_targets() {
    let s = parse("aws-lc", &params(json!({"slices": 3, "slice_index": 1, "start_at_unix_ns": 5}))).unwrap();
    assert_eq!((s.only_slice, s.start_at_unix_ns, s.slice_ids()), (Some(1), Some(5), vec![1]));
    assert_eq!((0..9).filter(|&i| s.runs_target(i)).collect::<Vec<_>>(), vec![1, 4, 7]);
    // a target's latency draws depend on its global number only, so a sub-job's equal the whole job's
    let whole = parse("aws-lc", &params(json!({"slices": 3, "rtt_ms": "lognormal:p50=5,p99=20"}))).unwrap();
    let part = parse("aws-lc", &params(json!({"slices": 3, "slice_index": 1, "rtt_ms": "lognormal:p50=5,p99=20"}))).unwrap();
    assert_eq!(whole.times_of(4).wait_ns, part.times_of(4).wait_ns);
    let all = parse("aws-lc", &params(json!({"slices": 3}))).unwrap();
    assert_eq!((all.slice_ids(), (0..4).all(|i| all.runs_target(i))), (vec![0, 1, 2], true));
    for (p, want) in [
        (json!({"slices": 2, "slice_index": 2}), "names no slice of slices = 2"),
        (json!({"start_at_unix_ns": 5}), "needs slice_index"),
        (json!({"slices": 2, "slice_index": 0, "start_at_unix_ns": 0}), "start_at_unix_ns must be"),
    ] {
        let e = parse("aws-lc", &params(p.clone())).err().unwrap_or_default();
        assert!(e.contains(want) && !e.contains('\n'), "{p}: {e}");
    }
}

#[test]
fn a_sub_job_waits_for_its_start_instant_and_refuses_to_start_late() {
    let at = unix_now_ns() + 20_000_000;
    assert!(wait_until(at).is_ok());
    assert!(unix_now_ns() >= at);
    match wait_until(unix_now_ns() - 2 * MAX_START_LATE_NS) {
        Err(crate::workloads::base::Finish::Invalid(why, _)) => assert!(why.contains("after its start instant"), "{why}"),
        _ => panic!("a sub-job whose start instant has passed must not run"),
    }
}

/// A sub-job's result as the worker writes it (the fields the merge reads), slice `j` of 2,
/// started at `start` (unix ns), `wall` ns long, its targets' times in ns.
fn sub_result(j: usize, start: u64, wall: u64, times_ns: &[u64], targets: &[i64]) -> Value {
    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
    use base64::Engine as _;
    let mut h = crate::measure::new_histogram();
    for t in times_ns {
        h.record(*t).unwrap();
    }
    let mut enc = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut enc).unwrap();
    let rows: Vec<Value> = targets.iter().map(|t| json!([t, j, "ok", 10, 20])).collect();
    let fleet = json!({"slices": 2, "targets": 4, "completed": targets.len(), "failed": 0, "setup_ms": 50.0 * (j + 1) as f64,
                  "host_cpus": 2, "agent_errors": 0, "agent_first_error": null, "start_unix_ns": start, "slice_index": j,
                  "records": {"columns": ["target", "slice", "status", "connect_start_us", "connect_end_us"], "rows": rows},
                  "failures": [], "mismatches": [], "job_phases": [],
                  "processes": [{"role": "slice", "index": j, "timeline_offset_ms": 1.0}]});
    json!({
        "type": "result", "id": "r1", "backend": "aws-lc", "op": NAME, "status": "ok",
        "params": {"slices": 2, "slice_index": j, "start_at_unix_ns": start, "load": "targets:4"},
        "ops": targets.len(), "wall_ns": wall, "cpu_ns": [100, 200], "cpu_ns_total": 300, "tsc_cycles": null,
        "steal_ticks": 0, "busy_ticks": 5, "total_ticks": 10, "histogram": base64::engine::general_purpose::STANDARD.encode(enc),
        "samples": times_ns.len(), "sample_ns_stats": {"min": 0, "max": 0}, "late": 0, "placement": "not pinned",
        "server": {"cpu_ns": 7, "transactions": targets.len(), "window": true, "address": "127.0.0.1:1", "timeline": null},
        "placed": {"node_id": format!("node{j}"), "address": format!("10.0.0.{j}"), "hostname": format!("h{j}")},
        "fleet": fleet,
    })
}

#[test]
fn merging_sub_jobs_gives_one_job_from_the_first_start_to_the_last_end() {
    use super::merge::merge;
    let a = sub_result(0, 1_000_000_000, 4_000_000, &[1000, 2000], &[0, 2]);
    let b = sub_result(1, 1_002_000_000, 5_000_000, &[3000, 4000], &[1, 3]);
    let m = merge(&[b.clone(), a.clone()]).unwrap();
    assert_eq!(m["status"], "ok");
    assert_eq!(m["ops"], 4);
    assert_eq!(m["wall_ns"], 7_000_000); // slice 1 ends 2 ms + 5 ms after slice 0's start
    assert_eq!((m["cpu_ns"].as_array().unwrap().len(), &m["cpu_ns_total"], &m["server"]["cpu_ns"]), (4, &json!(600), &json!(14)));
    assert_eq!((&m["samples"], &m["total_ticks"]), (&json!(4), &json!(20)));
    assert!(m["params"].get("slice_index").is_none() && m["params"].get("start_at_unix_ns").is_none());
    let f = &m["fleet"];
    assert_eq!((&f["completed"], &f["host_cpus"], &f["setup_ms"], &f["start_unix_ns"]), (&json!(4), &json!(4), &json!(100.0), &json!(1_000_000_000u64)));
    let rows = f["records"]["rows"].as_array().unwrap();
    assert_eq!(rows.iter().map(|r| (r[0].as_i64().unwrap(), r[1].as_i64().unwrap())).collect::<Vec<_>>(), vec![(0, 0), (1, 1), (2, 0), (3, 1)]);
    assert_eq!((&rows[0][3], &rows[1][3], &rows[1][4]), (&json!(10), &json!(2010), &json!(2020))); // slice 1's times shifted by its 2 ms later start
    assert_eq!(f["processes"][1]["timeline_offset_ms"], json!(3.0));
    let subs = f["sub_jobs"].as_array().unwrap();
    assert_eq!((&subs[0]["node_id"], &subs[1]["node_id"], &subs[1]["wall_ns"]), (&json!("node0"), &json!("node1"), &json!(5_000_000)));
    assert!(f.get("slice_index").is_none());
    // the merged histogram holds both sub-jobs' targets
    let decoded = {
        use base64::Engine as _;
        let raw = base64::engine::general_purpose::STANDARD.decode(m["histogram"].as_str().unwrap()).unwrap();
        hdrhistogram::serialization::Deserializer::new().deserialize::<u64, _>(&mut &raw[..]).unwrap()
    };
    assert_eq!((decoded.len(), decoded.min(), decoded.max() >= 4000), (4, 1000, true));

    // a sub-job that did not end ok ends the job so, saying which slice and where
    let mut bad = b.clone();
    bad["status"] = json!("invalid");
    bad["reason"] = json!("the probe target failed");
    let m = merge(&[a.clone(), bad]).unwrap();
    assert_eq!(m["status"], "invalid");
    assert!(m["reason"].as_str().unwrap().contains("slice 1's sub-job (on h1, 10.0.0.1, node node1): the probe target failed"), "{}", m["reason"]);
    assert!(m.get("ops").is_none() && m.get("fleet").is_none());

    // not the sub-jobs of one job: one line each
    for (parts, want) in [
        (vec![a.clone(), a.clone()], "once each"),
        (vec![a.clone()], "once each"),
        (vec![], "no sub-job results"),
    ] {
        let e = merge(&parts).unwrap_err();
        assert!(e.contains(want) && !e.contains('\n'), "{e}");
    }
    let mut overlap = b.clone();
    overlap["fleet"]["records"]["rows"][0][0] = json!(0);
    assert!(merge(&[a, overlap]).unwrap_err().contains("overlap"));
}
