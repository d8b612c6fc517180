//! One job's result from its sub-jobs' (`--merge-jobs`): a job whose slices ran on several
//! machines, each slice a sub-job (`slice_index`, started at one wall-clock instant,
//! `start_at_unix_ns`) with its own agents, read as the one job it was.
//!
//! The job's time is from the first sub-job's start to the last one's end on the wall clock
//! (each sub-job's start read on its host's `CLOCK_REALTIME`, its end that start plus its own
//! monotonic `wall_ns`): across machines this holds as far as their clocks agree (NTP keeps
//! them within a few ms, small against a job of seconds). Operations, CPU, ticks and the agents'
//! counters are summed, the histograms merged, the records, failures and processes concatenated
//! (times shifted to the merged start; slice numbers are already the job's), and `sub_jobs`
//! says where each slice ran.

use crate::measure::new_histogram;
use crate::result::SubJob;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::io::BufRead;
use super::spec::*;

/// `cryptoperf-worker --merge-jobs`: read the sub-jobs' `result` messages on stdin, one a line
/// (each may carry `placed`: `node_id`, `address`, `hostname` of where it ran), write the
/// job's one `result` line on stdout. Returns the exit status: 0, or 2 with one line on stderr
/// when the lines are not the sub-jobs of one job.
pub fn merge_main() -> i32 {
    let lines: Result<Vec<Value>, String> = std::io::stdin()
        .lock()
        .lines()
        .map_while(Result::ok)
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(n, l)| serde_json::from_str(&l).map_err(|e| format!("line {}: not JSON: {e}", n + 1)))
        .collect();
    match lines.and_then(|parts| merge(&parts)) {
        Ok(v) => {
            println!("{v}");
            0
        }
        Err(e) => {
            eprintln!("cryptoperf-worker {MERGE_FLAG}: {e}");
            2
        }
    }
}

fn u64_at(v: &Value, path: &str) -> u64 {
    v.pointer(path).and_then(Value::as_u64).unwrap_or(0)
}

/// The job's result from its sub-jobs' results (any order). Errors (one line): the parts are
/// not one `fleet-job`'s sub-jobs, each slice once, or a part is unreadable. A part that did
/// not end `ok` makes the job end as it did, its reason naming the slice and where it ran.
pub fn merge(parts: &[Value]) -> Result<Value, String> {
    let first = parts.first().ok_or("no sub-job results on stdin")?;
    let mut parts: Vec<&Value> = parts.iter().collect();
    parts.sort_by_key(|p| u64_at(p, &format!("/params/{SLICE_INDEX}")));
    for (j, p) in parts.iter().enumerate() {
        if p["type"] != "result" || p["op"] != NAME {
            return Err(format!("part {j} is not a {NAME} result message"));
        }
        if p["op"] != first["op"] || p["backend"] != first["backend"] {
            return Err("the parts are results of different operations or backends".into());
        }
        let slices = p.pointer("/params/slices").and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()));
        if p.pointer(&format!("/params/{SLICE_INDEX}")).and_then(Value::as_u64) != Some(j as u64) || slices != Some(parts.len() as u64) {
            return Err(format!("the parts must be the sub-jobs of one job, {SLICE_INDEX} 0..slices-1 once each, with slices = their number ({})", parts.len()));
        }
    }
    let mut out = (*parts[0]).clone();
    if let Some(params) = out["params"].as_object_mut() {
        params.remove(SLICE_INDEX);
        params.remove(START_AT);
    }
    if let Some((j, p)) = parts.iter().enumerate().find(|(_, p)| p["status"] != "ok") {
        out["status"] = p["status"].clone();
        out["reason"] = format!("slice {j}'s sub-job{}: {}", where_text(p), p["reason"].as_str().unwrap_or("?")).into();
        out["validation"] = p["validation"].clone();
        let keep = ["type", "id", "backend", "op", "library", "library_version", "fips", "params", "threads", "status", "reason",
                    "cpu_mask", "capabilities", "cpu_mask_cleared", "validation"];
        if let Some(o) = out.as_object_mut() {
            o.retain(|k, v| keep.contains(&k.as_str()) && !v.is_null());
        }
        return Ok(out);
    }
    merge_ok(&parts, out)
}

/// ` (on <hostname> <address>, node <id>)` from a part's `placed`, '' without one.
fn where_text(p: &Value) -> String {
    let pl = &p["placed"];
    let bits: Vec<String> = [("", "hostname"), ("", "address"), ("node ", "node_id")]
        .iter()
        .filter_map(|(pre, k)| pl[*k].as_str().map(|s| format!("{pre}{s}")))
        .collect();
    if bits.is_empty() { String::new() } else { format!(" (on {})", bits.join(", ")) }
}

fn histogram_of(p: &Value) -> Result<Histogram<u64>, String> {
    let raw = base64::engine::general_purpose::STANDARD.decode(p["histogram"].as_str().unwrap_or("")).map_err(|e| format!("histogram: {e}"))?;
    Deserializer::new().deserialize(&mut &raw[..]).map_err(|e| format!("histogram: {e:?}"))
}

fn sum(parts: &[&Value], path: &str) -> u64 {
    parts.iter().map(|p| u64_at(p, path)).sum()
}

fn concat(parts: &[&Value], path: &str, each: impl Fn(usize, &Value) -> Value) -> Value {
    parts.iter().enumerate().flat_map(|(j, p)| p.pointer(path).and_then(Value::as_array).into_iter().flatten().map(move |v| (j, v))).map(|(j, v)| each(j, v)).collect()
}

/// Merge the `ok` parts (sorted by slice) into `out` (a copy of slice 0's).
fn merge_ok(parts: &[&Value], mut out: Value) -> Result<Value, String> {
    let starts: Vec<u64> = parts.iter().map(|p| u64_at(p, "/fleet/start_unix_ns")).collect();
    if starts.contains(&0) {
        return Err("a part has no fleet.start_unix_ns (a worker older than --merge-jobs)".into());
    }
    let t0 = *starts.iter().min().expect("parts");
    let end = parts.iter().zip(&starts).map(|(p, s)| s + u64_at(p, "/wall_ns")).max().expect("parts");
    let shift_us: Vec<i64> = starts.iter().map(|s| ((s - t0) as f64 / 1e3).round() as i64).collect();
    let mut histogram = new_histogram();
    for p in parts {
        histogram.add(histogram_of(p)?).map_err(|e| format!("histogram: {e:?}"))?;
    }
    let mut encoded = Vec::new();
    V2DeflateSerializer::new().serialize(&histogram, &mut encoded).map_err(|e| format!("histogram: {e:?}"))?;
    let cpu_ns = concat(parts, "/cpu_ns", |_, v| v.clone());
    let o = out.as_object_mut().expect("a result is an object");
    o.insert("ops".into(), sum(parts, "/ops").into());
    o.insert("wall_ns".into(), (end - t0).max(1).into());
    o.insert("cpu_ns_total".into(), sum(parts, "/cpu_ns_total").into());
    o.insert("cpu_ns".into(), cpu_ns);
    o.insert("tsc_cycles".into(), Value::Null);
    for k in ["steal_ticks", "busy_ticks", "total_ticks", "samples", "late"] {
        o.insert(k.into(), sum(parts, &format!("/{k}")).into());
    }
    o.insert("histogram".into(), base64::engine::general_purpose::STANDARD.encode(encoded).into());
    let completed = histogram.len();
    let stats = json!({"min": if completed == 0 { 0 } else { histogram.min() }, "max": histogram.max()});
    o.insert("sample_ns_stats".into(), stats);
    o.insert("placement".into(), format!("slices on {} hosts, one sub-job each, started at one wall-clock instant: {}", parts.len(),
        parts.iter().enumerate().map(|(j, p)| format!("slice {j}{}: {}", where_text(p), p["placement"].as_str().unwrap_or(""))).collect::<Vec<_>>().join("; ")).into());
    o.insert("server".into(), server(parts));
    o.insert("fleet".into(), fleet(parts, &starts, &shift_us)?);
    Ok(out)
}

/// The agents of every sub-job together: CPU and transactions summed, the rest slice 0's.
fn server(parts: &[&Value]) -> Value {
    let mut s = parts[0]["server"].clone();
    s["cpu_ns"] = sum(parts, "/server/cpu_ns").into();
    s["transactions"] = sum(parts, "/server/transactions").into();
    s
}

/// The merged `fleet`: totals, records and processes of every sub-job, and `sub_jobs`.
fn fleet(parts: &[&Value], starts: &[u64], shift_us: &[i64]) -> Result<Value, String> {
    let mut f: Map<String, Value> = parts[0]["fleet"].as_object().cloned().ok_or("a part has no fleet object")?;
    let columns = f["records"]["columns"].clone();
    let timed: Vec<bool> = columns.as_array().into_iter().flatten().map(|c| c.as_str().is_some_and(|c| c.ends_with("_start_us") || c.ends_with("_end_us"))).collect();
    let mut rows: Vec<Value> = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        if p["fleet"]["records"]["columns"] != columns {
            return Err("the parts' records have different columns".into());
        }
        for row in p["fleet"]["records"]["rows"].as_array().into_iter().flatten() {
            let cells = row.as_array().ok_or("a record is not a list")?;
            rows.push(cells.iter().zip(&timed).map(|(c, t)| match (c.as_i64(), t) {
                (Some(us), true) => (us + shift_us[j]).into(),
                _ => c.clone(),
            }).collect());
        }
    }
    rows.sort_by_key(|r| r[0].as_i64().unwrap_or(i64::MAX));
    if rows.windows(2).any(|w| w[0][0] == w[1][0]) {
        return Err("a target has records in two parts (the parts' shares overlap)".into());
    }
    let by_target = |a: &Value| a["target"].as_u64().unwrap_or(u64::MAX);
    let mut failures: Vec<Value> = concat(parts, "/fleet/failures", |_, v| v.clone()).as_array().cloned().unwrap_or_default();
    failures.sort_by_key(by_target);
    let mut mismatches: Vec<Value> = concat(parts, "/fleet/mismatches", |_, v| v.clone()).as_array().cloned().unwrap_or_default();
    mismatches.sort_by_key(by_target);
    let shifted = |j: usize, v: &Value, keys: &[&str], scale: f64| {
        let mut v = v.clone();
        for k in keys {
            if let Some(x) = v[*k].as_f64() {
                v[*k] = json!(x + shift_us[j] as f64 * scale);
            }
        }
        v
    };
    f.insert("job_phases".into(), concat(parts, "/fleet/job_phases", |j, v| {
        let mut v = v.clone();
        for k in ["start_us", "end_us"] {
            v[k] = (v[k].as_i64().unwrap_or(0) + shift_us[j]).into();
        }
        v
    }));
    f.insert("processes".into(), concat(parts, "/fleet/processes", |j, v| shifted(j, v, &["timeline_offset_ms"], 1e-3)));
    f.insert("records".into(), json!({"columns": columns, "rows": rows}));
    f.insert("failures".into(), failures.into());
    f.insert("mismatches".into(), mismatches.into());
    for k in ["completed", "failed", "agent_errors", "host_cpus"] {
        f.insert(k.into(), sum(parts, &format!("/fleet/{k}")).into());
    }
    let setup = parts.iter().filter_map(|p| p["fleet"]["setup_ms"].as_f64()).fold(0.0, f64::max);
    f.insert("setup_ms".into(), json!(setup));
    f.insert("agent_first_error".into(), parts.iter().find_map(|p| p["fleet"]["agent_first_error"].as_str()).into());
    f.insert("start_unix_ns".into(), starts.iter().min().copied().unwrap_or(0).into());
    f.remove("slice_index");
    let subs: Vec<SubJob> = parts
        .iter()
        .enumerate()
        .map(|(j, p)| SubJob {
            slice: j,
            node_id: p["placed"]["node_id"].as_str().map(String::from),
            address: p["placed"]["address"].as_str().map(String::from),
            hostname: p["placed"]["hostname"].as_str().map(String::from),
            start_unix_ns: starts[j],
            wall_ns: u64_at(p, "/wall_ns"),
            setup_ms: p["fleet"]["setup_ms"].as_f64().unwrap_or(0.0),
            host_cpus: u64_at(p, "/fleet/host_cpus") as usize,
            completed: u64_at(p, "/fleet/completed"),
        })
        .collect();
    f.insert("sub_jobs".into(), serde_json::to_value(subs).map_err(|e| e.to_string())?);
    Ok(Value::Object(f))
}
