//! Unit tests of the protocol loop (`serve`): conversations fed as lines, answers checked
//! against docs/worker-protocol.md.

use super::*;
use base64::Engine as _;

/// Feed `requests` (one per line) to a worker; return its exit status and response lines.
fn converse(requests: &[&str]) -> (i32, Vec<Value>) {
    let input = requests.join("\n");
    let mut out = Vec::new();
    let status = serve(input.as_bytes(), &mut out).unwrap();
    let lines = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (status, lines)
}

const HELLO: &str = r#"{"type":"hello","protocol":1}"#;

#[test]
fn hello_lists_backends_and_ops() {
    let (status, out) = converse(&[HELLO, r#"{"type":"bye"}"#]);
    assert_eq!(status, 0);
    assert_eq!(out[0]["type"], "hello");
    assert_eq!(out[0]["protocol"], 1);
    let names: Vec<_> = out[0]["backends"].as_array().unwrap().iter().map(|b| b["backend"].clone()).collect();
    assert_eq!(names, vec!["openssl", "aws-lc", "ring", "rustcrypto", "pkcs11"]);
    // the device backend says so; the libraries do not
    let devices: Vec<_> = out[0]["backends"].as_array().unwrap().iter().map(|b| b["device"].clone()).collect();
    assert_eq!(devices, vec![Value::Null, Value::Null, Value::Null, Value::Null, json!("pkcs11")]);
    assert!(out[0]["ops"].as_array().unwrap().contains(&json!("rsa2048-sign")));
}

#[test]
fn a_protocol_mismatch_is_refused_and_ends_the_worker() {
    let (status, out) = converse(&[r#"{"type":"hello","protocol":2}"#, HELLO]);
    assert_eq!(status, EXIT_PROTOCOL_MISMATCH);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["code"], "protocol_mismatch");
    assert!(out[0]["message"].as_str().unwrap().contains("protocol 1"));
}

#[test]
fn check_answers_what_a_run_plans_to_take() {
    let (code, out) = converse(&[
        r#"{"type":"hello","protocol":1}"#,
        // p256: the key exchange the FIPS build takes too
        r#"{"type":"check","id":"a","backend":"aws-lc","op":"tls-handshake","params":{"group":"p256"}}"#,
        r#"{"type":"check","id":"b","backend":"aws-lc","op":"fleet-job","params":{"job":"audit","group":"p256","phases":"connect,report","cap":4,"rtt_ms":10,"load":"targets:20"}}"#,
    ]);
    assert_eq!(code, 0);
    // a time-window workload waits nothing by design and leaves its time to the orchestrator
    assert_eq!(out[1]["planned_wait_s"], 0.0, "{}", out[1]);
    assert!(out[1].get("planned_work_s").is_none(), "{}", out[1]);
    // a job: 20 targets on 4 threads, 3 round trips of 10 ms each: 5 rounds of 30 ms
    assert!((out[2]["planned_wait_s"].as_f64().unwrap() - 0.150).abs() < 1e-9, "{}", out[2]);
    assert!(out[2]["planned_work_s"].as_f64().unwrap() > 0.0, "{}", out[2]);
}

#[test]
fn check_says_whether_a_workload_combination_is_supported_without_running_it() {
    let (code, out) = converse(&[
        r#"{"type":"hello","protocol":1}"#,
        r#"{"type":"check","id":"a","backend":"aws-lc","op":"tls-handshake","params":{"group":"x25519mlkem768"}}"#,
        r#"{"type":"check","id":"b","backend":"ring","op":"tls-handshake","params":{"group":"x25519mlkem768"}}"#,
        r#"{"type":"check","id":"c","backend":"ring","op":"ike-phase1","params":{"dh_group":"modp2048"}}"#,
        r#"{"type":"check","id":"d","backend":"aws-lc","op":"tls-handshake","params":{"group":"x448"}}"#,
    ]);
    assert_eq!(code, 0);
    assert_eq!((out[1]["type"].as_str(), out[1]["status"].as_str()), (Some("checked"), Some("supported")));
    // ring lacks ML-KEM and FFDH; in the FIPS build it runs nothing at all, which it says first.
    let fips = crate::fips::BUILD == "fips";
    assert_eq!(out[2]["status"], "unsupported");
    assert!(out[2]["reason"].as_str().unwrap().contains(if fips { "FIPS" } else { "ML-KEM" }), "{}", out[2]);
    assert_eq!(out[3]["status"], "unsupported");
    assert!(out[3]["reason"].as_str().unwrap().contains(if fips { "FIPS" } else { "FFDH" }), "{}", out[3]);
    assert_eq!((out[4]["type"].as_str(), out[4]["code"].as_str()), (Some("error"), Some("bad_params")));
    assert!(out[1..].iter().all(|m| m.get("ops").is_none()), "a check measures nothing");
}

#[test]
fn bad_requests_get_errors_and_the_worker_goes_on() {
    let (status, out) = converse(&[
        r#"{"type":"run","id":"early","backend":"mock","op":"sha256"}"#,
        HELLO,
        "not json",
        r#"{"type":"run","id":"a","backend":"nosuch","op":"sha256"}"#,
        r#"{"type":"run","id":"b","backend":"mock","op":"sha265"}"#,
        r#"{"type":"run","id":"c","backend":"mock","op":"sha256","params":{"size_bytes":0}}"#,
        r#"{"type":"run","id":"d","backend":"mock","op":"sha256","threads":0}"#,
        r#"{"type":"run","id":"e","backend":"mock","op":"sha256","param":{}}"#,
        r#"{"type":"launch"}"#,
    ]);
    assert_eq!(status, 0);
    let codes: Vec<_> = out.iter().map(|m| m["code"].as_str().unwrap_or("-").to_string()).collect();
    assert_eq!(
        codes,
        ["bad_request", "-", "bad_request", "unknown_backend", "unknown_op", "bad_params", "bad_params", "bad_request", "bad_request"]
    );
    assert!(out[3]["message"].as_str().unwrap().contains("known: openssl, aws-lc, ring, rustcrypto"));
    assert!(out[4]["message"].as_str().unwrap().contains("sha256"));
    assert_eq!(out[3]["id"], "a");
}

#[test]
fn hello_lists_cpu_masks_and_each_backends_capabilities() {
    let (_, out) = converse(&[HELLO]);
    let masks = out[0]["cpu_masks"].as_array().unwrap();
    let names: Vec<_> = masks.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["baseline", "no-aesni", "no-shani", "no-avx2", "no-avx512", "no-bignum"]);
    let zero = "~0x0000000000000000";
    assert_eq!(masks[0]["openssl_ia32cap"], [zero; 5].join(":"));
    assert_eq!(
        masks[1]["openssl_ia32cap"],
        format!("~0x0200000200000000:~0x0000060000000000:{zero}:{zero}:{zero}")
    );
    assert_eq!(masks[1]["clears"], json!(["aes", "pclmulqdq", "vaes", "vpclmulqdq"]));
    assert_eq!(masks[5]["openssl_ia32cap"], format!("{zero}:~0x0000000000280100:{zero}:{zero}:{zero}"));
    assert_eq!(masks[5]["clears"], json!(["bmi2", "adx", "avx512ifma"]));
    let caps: std::collections::HashMap<_, _> = out[0]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["backend"].as_str().unwrap().to_string(), b["capabilities"].clone()))
        .collect();
    assert_eq!(caps["ring"]["maskable"], false);
    assert_eq!(caps["ring"]["reason"], "ring has no runtime CPU capability mask");
    assert_eq!(caps["rustcrypto"]["reason"], "RustCrypto has no runtime CPU capability mask");
    if cfg!(target_arch = "x86_64") {
        for b in ["openssl", "aws-lc"] {
            assert_eq!(caps[b]["maskable"], true, "{b}");
            assert!(caps[b]["openssl_ia32cap"].as_str().unwrap().starts_with("0x"), "{b}");
            assert!(caps[b]["flags"]["aes"].is_boolean(), "{b}");
        }
    }
}

#[test]
fn cpu_masks_are_checked_before_anything_runs() {
    let (_, out) = converse(&[
        HELLO,
        r#"{"type":"run","id":"a","backend":"mock","op":"sha256","cpu_mask":"no-aes"}"#,
        r#"{"type":"run","id":"b","backend":"mock","op":"sha256","cpu_mask":"no-aesni","seconds":0.01,"warmup_s":0}"#,
        r#"{"type":"run","id":"c","backend":"mock","op":"sha256","cpu_mask":"baseline","seconds":0.01,"warmup_s":0}"#,
        r#"{"type":"run","id":"d","backend":"ring","op":"sha256","cpu_mask":"no-shani","seconds":0.01,"warmup_s":0}"#,
    ]);
    assert_eq!(out[1]["code"], "bad_params");
    assert!(out[1]["message"].as_str().unwrap().contains("known: baseline, no-aesni, no-shani, no-avx2, no-avx512, no-bignum"));
    assert_eq!(out[2]["status"], "unsupported");
    assert_eq!(out[2]["reason"], "mock has no runtime CPU capability mask");
    assert_eq!(out[2]["cpu_mask"], "no-aesni");
    assert!(out[2].get("ops").is_none(), "an unmaskable case is never timed");
    assert_eq!(out[3]["status"], "ok", "{}", out[3]);
    assert_eq!(out[3]["cpu_mask"], "baseline");
    assert_eq!(out[4]["status"], "unsupported");
    // (In the FIPS build, ring is refused earlier, for having no FIPS mode.)
    let expected = crate::fips::unavailable("ring")
        .unwrap_or_else(|| "ring has no runtime CPU capability mask".into());
    assert_eq!(out[4]["reason"], expected.as_str());
}

/// This test process was started without OPENSSL_ia32cap, so a request for no-aesni reaches
/// libraries that did not apply it: that must come back invalid, untimed — never measured
/// as if masked.
#[test]
fn a_mask_the_library_did_not_apply_is_invalid() {
    let hw = CapVector::from_cpuid();
    if std::env::var_os(cpu::MASK_ENV).is_some() || !hw.is_some_and(|v| v.has("aes")) {
        return; // needs an unmasked process on a CPU with AES-NI
    }
    // (In the FIPS build without OpenSSL's FIPS provider, OpenSSL is refused before that.)
    for backend in ["openssl", "aws-lc"].into_iter().filter(|b| crate::fips::unavailable(b).is_none()) {
        let req = format!(
            r#"{{"type":"run","id":"x","backend":"{backend}","op":"aes-128-gcm-seal","cpu_mask":"no-aesni","seconds":0.01,"warmup_s":0}}"#
        );
        let (_, out) = converse(&[HELLO, &req]);
        let r = &out[1];
        assert_eq!(r["status"], "invalid", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(reason.starts_with("capability mask not applied: "), "{reason}");
        assert!(reason.contains("still uses aes, pclmulqdq") && reason.contains("unset"), "{reason}");
        assert_eq!(r["capabilities"]["flags"]["aes"], true);
        assert!(r.get("ops").is_none() && r.get("validation").is_none());
    }
}

#[test]
fn a_mock_run_round_trips_with_a_decodable_histogram() {
    let (_, out) = converse(&[
        HELLO,
        r#"{"type":"run","id":"m","backend":"mock:2","op":"sha256","params":{"size_bytes":5000},"warmup_s":0.01,"seconds":0.05}"#,
    ]);
    let r = &out[1];
    assert_eq!(r["type"], "result");
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["id"], "m");
    assert_eq!(r["bytes_per_op"], 5000);
    assert_eq!(r["timing"], "individual");
    let ops = r["ops"].as_u64().unwrap();
    assert!(ops > 0);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(r["histogram"].as_str().unwrap())
        .unwrap();
    let h: hdrhistogram::Histogram<u64> =
        hdrhistogram::serialization::Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
    assert_eq!(h.len(), ops);
    // mock:2 waits 2 ns per byte: 10 µs per operation.
    assert!(h.value_at_quantile(0.5) >= 9_990, "p50 = {}", h.value_at_quantile(0.5));
}

/// `parse_run` on one request line (without its `type`).
fn parse(request: Value) -> Result<Case, RequestError> {
    let Value::Object(body) = request else { panic!("not an object") };
    parse_run(body, false)
}

fn refusal(request: Value) -> RequestError {
    match parse(request.clone()) {
        Ok(_) => panic!("accepted: {request}"),
        Err(e) => e,
    }
}

fn hello_now() -> Value {
    converse(&[HELLO]).1.remove(0)
}

/// `limits` is what parse_run enforces: each maximum is accepted, one more is refused.
#[test]
fn hello_limits_are_the_limits_run_enforces() {
    let limits = hello_now()["limits"].clone();
    assert_eq!(
        limits,
        json!({"max_threads": 1024, "max_seconds": 3600.0, "max_warmup_s": 600.0,
               "max_size_bytes": 67108864, "max_batch": 1048576, "max_request_bytes": 1048576,
               "max_concurrency": 1024, "open_threads": 32, "max_targets": 10000})
    );
    let base = json!({"backend": "mock", "op": "sha256"});
    let with = |field: &str, value: Value| {
        let mut r = base.clone();
        r[field] = value;
        r
    };
    let max = |name: &str| limits[name].clone();
    let plus_one = |name: &str| {
        let v = &limits[name];
        v.as_u64().map_or_else(|| json!(v.as_f64().unwrap() + 1.0), |n| json!(n + 1))
    };
    for (field, limit) in [("threads", "max_threads"), ("seconds", "max_seconds"), ("warmup_s", "max_warmup_s"), ("batch", "max_batch")] {
        assert!(parse(with(field, max(limit))).is_ok(), "{field} = {}", max(limit));
        let e = refusal(with(field, plus_one(limit)));
        assert_eq!(e.code, "bad_params", "{field}: {}", e.message);
        assert!(e.message.starts_with(field), "{}", e.message);
    }
    let sized = |v: Value| with("params", json!({"size_bytes": v}));
    let case = parse(sized(max("max_size_bytes"))).map(|c| c.op_params()).unwrap();
    assert_eq!(json!(case.size_bytes), max("max_size_bytes"));
    let e = refusal(sized(plus_one("max_size_bytes")));
    assert_eq!(e.code, "bad_params");
    assert!(e.message.contains("size_bytes 67108865 is larger than the limit"), "{}", e.message);
    // A workload's level: the most connections, an open level's threads, the most targets.
    let level = |op: &str, load: String| json!({"backend": "aws-lc", "op": op, "params": {"load": load}});
    let n = |name: &str| limits[name].as_u64().unwrap();
    assert!(parse(level("tls-handshake", format!("closed:{}", n("max_concurrency")))).is_ok());
    let e = refusal(level("tls-handshake", format!("closed:{}", n("max_concurrency") + 1)));
    assert!(e.message.contains("THREADS 1..=1024"), "{}", e.message);
    let Ok(Case { what: What::Workload(w), .. }) = parse(level("tls-handshake", "open:100".into())) else { panic!("open:100") };
    assert_eq!(w.common.load.threads() as u64, n("open_threads"));
    assert!(parse(level("fleet-job", format!("targets:{}", n("max_targets")))).is_ok());
    let e = refusal(level("fleet-job", format!("targets:{}", n("max_targets") + 1)));
    assert!(e.message.contains("1..=10000"), "{}", e.message);
}

/// `op_params` and `param_values` are what Params parsing accepts: for every operation each
/// listed parameter (with every announced value) is accepted and each other refused, and
/// the announced defaults are the ones filled in.
#[test]
fn hello_op_params_are_what_run_accepts() {
    let hello = hello_now();
    let (op_params, values) = (&hello["op_params"], &hello["param_values"]);
    assert_eq!(values["digest"], json!(["sha1", "sha256", "sha384", "sha512", "sha3-256"]));
    assert_eq!(values["padding"], json!(["pkcs1", "pss"]));
    let ops = hello["ops"].as_array().unwrap();
    assert_eq!(op_params.as_object().unwrap().len(), ops.len());
    let max_size = hello["limits"]["max_size_bytes"].clone();
    let samples = |param: &str| -> Vec<Value> {
        match param {
            "size_bytes" => vec![json!(1), json!(1000), max_size.clone()],
            _ => values[param].as_array().unwrap().clone(),
        }
    };
    for op in ops {
        let name = op.as_str().unwrap();
        let entry = &op_params[name];
        let params: Vec<&str> = entry["params"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
        if entry["workload"] == json!(true) {
            // A workload: every announced value of every enumerated parameter is accepted,
            // a parameter it does not list is refused, and so is a value outside the list.
            let request = |params: Value| json!({"backend": "aws-lc", "op": name, "params": params});
            for param in &params {
                // (`mode`: the workload's own modes; the others are refused, as
                // workloads::tests checks.)
                let announced = if *param == "mode" { &entry["modes"] } else { &values[*param] };
                for value in announced.as_array().cloned().unwrap_or_default() {
                    if let Err(e) = parse(request(json!({*param: value.clone()}))) {
                        panic!("{name} refused its announced {param} {value}: {}", e.message);
                    }
                }
                if values.get(*param).is_some() {
                    let e = refusal(request(json!({*param: "no-such-value"})));
                    assert_eq!(e.code, "bad_params", "{name} {param}");
                }
            }
            let e = refusal(request(json!({"padding": "pss"})));
            assert!(e.message.contains("unknown parameter 'padding'"), "{}", e.message);
            continue;
        }
        let request = |params: Value| json!({"backend": "mock", "op": name, "params": params});
        // defaults
        let resolved = parse(request(json!({}))).map(|c| c.op_params()).unwrap();
        let size = &entry["default_size_bytes"];
        assert_eq!(params.contains(&"size_bytes"), !size.is_null(), "{name}");
        assert_eq!(json!(resolved.size_bytes), if size.is_null() { json!(0) } else { size.clone() }, "{name}");
        let resolved = serde_json::to_value(resolved).unwrap();
        for (param, default) in [("digest", "default_digest"), ("padding", "default_padding")] {
            assert_eq!(params.contains(&param), entry.get(default).is_some(), "{name} {default}");
            assert_eq!(resolved.get(param), entry.get(default), "{name} {param}");
        }
        for param in ops::PARAM_NAMES {
            for value in samples(param) {
                let result = parse(request(json!({param: value})));
                if params.contains(&param) {
                    let p = serde_json::to_value(result.map(|c| c.op_params()).unwrap()).unwrap();
                    assert_eq!(p[param], value, "{name} {param}");
                } else {
                    let e = result.err().unwrap_or_else(|| panic!("{name} accepted {param}"));
                    assert_eq!(e.code, "bad_params", "{name} {param}: {}", e.message);
                    assert!(e.message.contains(param), "{}", e.message);
                }
            }
        }
        // values outside param_values are refused
        for (param, bad) in [("digest", "md5"), ("padding", "oaep")] {
            if params.contains(&param) {
                let e = refusal(request(json!({param: bad})));
                assert_eq!(e.code, "bad_params");
                assert!(e.message.contains(&format!("unknown {param} '{bad}'")), "{}", e.message);
            }
        }
    }
    // Spot checks against the documented table (the FIPS approval entry apart: its own tests
    // are in `fips`; here only that every operation has one).
    let op_params: serde_json::Map<String, Value> = op_params
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, e)| {
            let mut e = e.clone();
            if e["workload"] != json!(true) {
                assert!(e["fips"]["approved"].is_boolean(), "{name}: {e}");
            }
            e.as_object_mut().unwrap().remove("fips");
            (name.clone(), e)
        })
        .collect();
    assert_eq!(op_params["ecdsa-p384-sign"], json!({"params": ["size_bytes", "digest"], "default_size_bytes": 32, "default_digest": "sha384"}));
    assert_eq!(
        op_params["rsa2048-verify"],
        json!({"params": ["size_bytes", "digest", "padding"], "default_size_bytes": 32, "default_digest": "sha256", "default_padding": "pkcs1"})
    );
    assert_eq!(op_params["aes-128-gcm-seal"], json!({"params": ["size_bytes"], "default_size_bytes": 1024}));
    assert_eq!(op_params["ml-kem-768-encaps"], json!({"params": [], "default_size_bytes": null}));
}

#[test]
fn cpu_vector_unmasked_is_checked_for_syntax() {
    let req = |mask: Value, vector: Value| {
        json!({"backend": "mock", "op": "sha256", "cpu_mask": mask, "cpu_vector_unmasked": vector})
    };
    let case = parse(req(json!("baseline"), json!("0xfffa3203078bffff:0x405fc6f1bf07ab"))).unwrap();
    assert_eq!(case.cpu_vector_unmasked, Some(CapVector([0xfffa3203078bffff, 0x405fc6f1bf07ab])));
    assert!(parse(req(json!("no-aesni"), Value::Null)).unwrap().cpu_vector_unmasked.is_none());
    for bad in [json!("0x1"), json!("fffa:405f"), json!("0x1:0x2:0x3"), json!(""), json!(12)] {
        let e = refusal(req(json!("baseline"), bad.clone()));
        // (A value of the wrong JSON type is a malformed request, as for every field.)
        if bad.is_string() {
            assert_eq!(e.code, "bad_params", "{bad}: {}", e.message);
            assert!(e.message.contains("cpu_vector_unmasked must be '0x<word0>:0x<word1>'"), "{}", e.message);
        } else {
            assert_eq!(e.code, "bad_request", "{bad}: {}", e.message);
        }
    }
    let e = refusal(req(Value::Null, json!("0x1:0x2")));
    assert_eq!(e.code, "bad_params");
    assert!(e.message.contains("give cpu_mask too"), "{}", e.message);
}

/// This test process was started without OPENSSL_ia32cap, so baseline's value is missing:
/// a library that reads the variable must not be measured as baseline (an unset variable is
/// not what every other configuration's worker sees), while ring and mock, which read
/// nothing, run.
#[test]
fn baseline_needs_its_value_in_the_environment() {
    if std::env::var_os(cpu::MASK_ENV).is_some() || !cfg!(target_arch = "x86_64") {
        return;
    }
    for backend in ["openssl", "aws-lc"].into_iter().filter(|b| crate::fips::unavailable(b).is_none()) {
        let req = format!(
            r#"{{"type":"run","id":"x","backend":"{backend}","op":"sha256","cpu_mask":"baseline","seconds":0.01,"warmup_s":0}}"#
        );
        let (_, out) = converse(&[HELLO, &req]);
        let r = &out[1];
        assert_eq!(r["status"], "invalid", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(reason.starts_with("capability mask not applied: OPENSSL_ia32cap in the worker's environment is unset"), "{reason}");
        assert!(r.get("ops").is_none() && r.get("validation").is_none());
    }
}
