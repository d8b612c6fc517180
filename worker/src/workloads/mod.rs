//! Workloads: what production runs, rather than one primitive — a TLS handshake, a TLS bulk
//! transfer, an IKE-style phase 1, file I/O through an encryption layer, a fleet job — measured
//! at a load level (`crate::measure::load`) and reported through the same `run` request and
//! `result` as the primitives (docs/worker-protocol.md, "Workloads").
//!
//! One file per workload ([`tls_handshake`], [`tls_bulk`], [`ike_phase1`], [`ike_sa`], [`storage`],
//! [`fleet_job`]), each implementing [`base::Workload`], and one line per workload in
//! [`WORKLOADS`]: `hello` announces each one's spec, a `run` or `check` reaches it through the
//! registry, and nothing else names a workload. A workload with a server side runs that side in
//! a second worker process ([`server`]), pinned to its own CPU where the host has two, so each
//! side's CPU time is measured apart. The TLS implementations live in [`tls`].

pub mod base;
#[cfg(test)]
mod echo;
pub mod fleet_job;
pub mod ike_phase1;
pub mod ike_sa;
pub mod server;
pub mod storage;
pub mod tls;
pub mod tls_bulk;
pub mod tls_handshake;

pub use base::{check, planned, ready_to_run, run, WorkloadCase};
use base::{DynWorkload, Mode, Params};
use serde_json::{Map, Value};

/// Every workload, one line each, in the order `hello` lists them.
pub static WORKLOADS: &[&dyn DynWorkload] = &[
    &tls_handshake::TlsHandshake,
    &tls_bulk::TlsBulk,
    &ike_phase1::IkePhase1,
    &ike_sa::IkeSa,
    &storage::Storage,
    &fleet_job::FleetJob,
    #[cfg(test)]
    &echo::Echo,
];

/// The workload a `run` request names as its `op`, or None.
pub fn by_name(name: &str) -> Option<&'static dyn DynWorkload> {
    WORKLOADS.iter().copied().find(|w| w.name() == name)
}

/// Every workload's name, in [`WORKLOADS`] order.
pub fn names() -> Vec<&'static str> {
    WORKLOADS.iter().map(|w| w.name()).collect()
}

/// Whether `name` is a workload (and not a primitive operation).
pub fn is_workload(name: &str) -> bool {
    by_name(name).is_some()
}

/// The parameters `name` accepts, in the order `hello` lists them (its own, then the common
/// ones it takes); empty for a name that is no workload.
pub fn param_names(name: &str) -> Vec<&'static str> {
    by_name(name).map_or_else(Vec::new, |w| {
        let spec = w.spec();
        spec.own_params.iter().chain(spec.common_params).copied().collect()
    })
}

/// The values each enumerated workload parameter accepts (merged into `hello`'s
/// `param_values`): every workload's, and `mode`'s (every mode a workload takes).
pub fn param_values() -> Map<String, Value> {
    let mut m = Map::new();
    let mut modes: Vec<Mode> = Vec::new();
    for w in WORKLOADS {
        let spec = w.spec();
        for (param, values) in spec.param_values {
            m.insert(param.into(), values.into());
        }
        modes.extend(spec.modes);
    }
    let modes: Vec<&str> = Mode::PARAMETER.iter().filter(|m| modes.contains(m)).map(|m| m.name()).collect();
    m.insert("mode".into(), modes.into());
    m
}

/// `hello`'s `op_params` entry of the workload `name`: `params` (its own, then the common ones
/// it takes), `workload: true`, `default_size_bytes` (null, or the bytes per transaction of a
/// bulk transfer) and its spec's fields (docs/worker-protocol.md, "hello").
pub fn op_params(name: &str) -> Value {
    let Some(w) = by_name(name) else { return Value::Null };
    let spec = w.spec();
    let size = spec.defaults.get("size_bytes").cloned().unwrap_or(Value::Null);
    let mut v = serde_json::to_value(&spec).expect("a spec serialises");
    v["params"] = param_names(name).into();
    v["workload"] = true.into();
    v["default_size_bytes"] = size;
    v
}

/// Check a workload request's `params` (every key known, every value valid).
///
/// Errors: one line naming the parameter and what it accepts.
pub fn parse(name: &str, backend_name: &str, params: &Params) -> Result<WorkloadCase, String> {
    let w = by_name(name).ok_or_else(|| format!("unknown workload '{name}'"))?;
    base::parse_with(w, backend_name, params)
}

/// The `--serve-workload` process (`server`): the configuration's workload found here.
pub fn serve_workload() -> i32 {
    server::child_main(parse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::load::Load;
    use serde_json::json;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn strs(v: &Value) -> Vec<&str> {
        v.as_array().unwrap_or_else(|| panic!("not a list: {v}")).iter().map(|x| x.as_str().unwrap()).collect()
    }

    #[test]
    fn bad_workload_params_get_one_line_each() {
        let cases = [
            (json!({"load": "closed:0"}), "load 'closed:0'"),
            (json!({"mode": "carrier-pigeon"}), "unknown mode"),
            (json!({"port": 70000}), "port must be"),
            (json!({"stall_ms": 1000, "stall_every_ms": 500}), "stall_ms (1000) must be shorter"),
            (json!({"colour": "blue"}), "unknown parameter 'colour'"),
            (json!({"address": "localhost:1"}), "address must be an IP address"),
            (json!({"mode": "memory", "stall_ms": 10}), "mode = socket only"),
            (json!({"load": "targets:3"}), "a targets:N level is not tls-handshake's"),
        ];
        for (p, want) in cases {
            let e = parse(tls_handshake::NAME, "aws-lc", &params(p.clone())).err().unwrap_or_default();
            assert!(e.contains(want), "{p}: {e}");
            assert!(!e.contains('\n'));
        }
        let e = parse(ike_phase1::NAME, "aws-lc", &params(json!({"mode": "socket"}))).err().unwrap();
        assert!(e.contains("mode must be memory"), "{e}");
        let e = parse(fleet_job::NAME, "aws-lc", &params(json!({"load": "closed:1"}))).err().unwrap();
        assert_eq!(e, "fleet-job's level is a number of targets: load = targets:N");
    }

    #[test]
    fn defaults_are_loopback_and_one_closed_connection() {
        let c = parse(tls_handshake::NAME, "aws-lc", &Map::new()).unwrap();
        assert!(c.common.address.is_loopback());
        assert_eq!(c.common.port, 0);
        assert_eq!(c.common.load, Load::Closed { concurrency: 1, pace_per_s: None });
        assert_eq!(c.common.mode, Mode::Socket);
    }

    #[test]
    fn every_workload_announces_its_params_and_defaults() {
        assert_eq!(names(), ["tls-handshake", "tls-bulk", "ike-phase1", "ike-sa", "storage", "fleet-job", "echo"]);
        for name in names() {
            let v = op_params(name);
            let listed = strs(&v["params"]);
            assert_eq!(listed, param_names(name));
            for (k, _) in v["defaults"].as_object().unwrap() {
                assert!(listed.contains(&k.as_str()), "{name}: default for unlisted {k}");
            }
            // Every default is accepted by the parser; `required` is always there.
            let defaults = v["defaults"].as_object().unwrap().clone();
            for required in strs(&v["required"]) {
                assert!(listed.contains(&required), "{name}: required {required} is not listed");
                assert!(!defaults.contains_key(required), "{name}: required {required} has a default");
            }
            assert!(parse(name, "aws-lc", &defaults).is_ok(), "{name}: {:?}", parse(name, "aws-lc", &defaults).err());
        }
    }

    /// A request's parameters with what the workload `entry` requires to run (a directory).
    fn runnable(entry: &Value, extra: Value) -> Map<String, Value> {
        let mut p = Map::new();
        for required in strs(&entry["required"]) {
            assert_eq!(required, "dir", "a required parameter this test cannot give");
            p.insert(required.into(), std::env::temp_dir().to_string_lossy().into_owned().into());
        }
        p.extend(params(extra));
        p
    }

    /// What hello announces of each workload's levels and modes is what its parser accepts:
    /// each announced level kind and mode accepted, every other refused; the default mode and
    /// level are the parser's; the parameters the spec points at are listed, with defaults.
    #[test]
    fn every_workload_accepts_exactly_the_levels_and_modes_it_announces() {
        let levels = [("closed", "closed:2"), ("open", "open:50/2"), ("targets", "targets:3")];
        for name in names() {
            let entry = op_params(name);
            let announced = strs(&entry["levels"]);
            assert!(!announced.is_empty(), "{name}");
            for (kind, level) in levels {
                let r = parse(name, "aws-lc", &runnable(&entry, json!({"load": level})));
                assert_eq!(r.is_ok(), announced.contains(&kind), "{name} at {level}: {:?}", r.err());
            }
            let listed = strs(&entry["params"]);
            for pointer in ["bytes_per_tx_param", "file_bytes_param"] {
                if let Some(p) = entry[pointer].as_str() {
                    assert!(listed.contains(&p), "{name}: {pointer} {p} is not a parameter");
                    assert!(entry["defaults"][p].is_u64(), "{name}: {pointer} {p} has no default");
                }
            }
            let mut named = strs(&entry["file_params"]);
            named.extend(strs(&entry["connection_params"]));
            if let Some(sut) = entry["server_under_test"].as_object() {
                assert!(strs(&entry["modes"]).contains(&"socket"), "{name}: a server under test is loaded in socket mode");
                // every entry names a parameter, but `ready_file` (a file's name)
                named.extend(sut.iter().filter(|(k, _)| *k != "ready_file").map(|(_, v)| v.as_str().unwrap()));
            }
            for p in named {
                assert!(listed.contains(&p), "{name}: announced parameter {p} is not one of its parameters");
            }
            if announced.contains(&"open_bytes") {
                assert!(entry["bytes_per_tx_param"].is_string() && announced.contains(&"open"), "{name}");
            }
            assert_eq!(entry["needs_dir"] == true, strs(&entry["required"]).contains(&"dir"), "{name}");
            assert_eq!(entry["needs_dir"] == true, entry["file_bytes_param"].is_string(), "{name}");
            assert_eq!(entry["job"] == true, announced == ["targets"], "{name}");
            if let Some(level) = entry["calibration_load"].as_str() {
                assert!(parse(name, "aws-lc", &runnable(&entry, json!({"load": level}))).is_ok(), "{name}: {level}");
            }
            // Modes: each announced one accepted, the others refused; none: no `mode` parameter.
            let modes = strs(&entry["modes"]);
            assert_eq!(listed.contains(&"mode"), !modes.is_empty(), "{name}");
            for mode in ["socket", "memory", "file", "carrier-pigeon"] {
                let r = parse(name, "aws-lc", &runnable(&entry, json!({"mode": mode})));
                assert_eq!(r.is_ok(), modes.contains(&mode), "{name} in mode {mode}: {:?}", r.err());
            }
            let case = parse(name, "aws-lc", &runnable(&entry, json!({}))).unwrap();
            assert_eq!(json!(case.common.mode.name()), entry["default_mode"], "{name}");
            assert_eq!(case.common.load, Load::parse(entry["defaults"]["load"].as_str().unwrap()).unwrap(), "{name}");
            assert!(modes.is_empty() || modes.contains(&entry["default_mode"].as_str().unwrap()), "{name}");
            // A workload without a server says so when asked for one; one with a server runs it
            // in socket mode.
            if entry["server"] == false {
                let e = case.workload.server_request(&case, &Value::Null).err().expect("no server side");
                assert!(e.message.contains("has no server"), "{name}: {}", e.message);
            } else {
                assert!(modes.contains(&"socket"), "{name}");
            }
            // What the analysis needs to name and size it.
            assert!(entry["transaction"]["one"].is_string() && entry["transaction"]["many"].is_string(), "{name}");
            assert!(entry["sizing"]["memory"]["base_bytes"].as_u64().unwrap() > 0, "{name}");
            // The figures and their directions are the analysis' (the orchestrator's), not a worker's.
            assert!(entry.get("metrics").is_none(), "{name}");
        }
    }

    /// Workloads that announce the same enumerated parameter agree on its values (hello has one
    /// `param_values` entry per parameter: `cert` for tls-handshake and ike-sa, `dh_group` for
    /// ike-phase1 and ike-sa).
    #[test]
    fn shared_enumerations_agree() {
        let mut seen: std::collections::HashMap<&str, Vec<String>> = Default::default();
        for w in WORKLOADS {
            for (param, values) in w.spec().param_values {
                if let Some(before) = seen.insert(param, values.clone()) {
                    assert_eq!(before, values, "{param}");
                }
            }
        }
        assert_eq!(param_values()["mode"], json!(["socket", "memory"]));
    }
}
