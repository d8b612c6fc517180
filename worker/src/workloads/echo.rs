//! `echo` (tests only): the smallest workload, to show what a new one costs — this file and one
//! line in `workloads::WORKLOADS`. One transaction copies a message of `size_bytes` into a
//! buffer and checks the copy, in this process; `hello` announces it, `run` and `check` reach it
//! through the registry, and its result is the common one.

use super::base::{number, object, Common, Finish, Mode, Outcome, Params, TransactionName,
                  Workload, WorkloadCase, WorkloadSpec};
use crate::result::{Measured, PlainResult, Validation, WorkloadDetail};
use crate::backends::{Backend, BackendError};
use crate::measure::load::{run_load, TxnFn};
use serde_json::json;
use std::time::Duration;

pub const NAME: &str = "echo";

/// The `echo` workload.
pub struct Echo;

impl Workload for Echo {
    type Request = usize;

    const NAME: &'static str = NAME;

    fn spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            own_params: &["size_bytes"],
            common_params: &["load", "mode"],
            defaults: object(json!({"size_bytes": 64, "load": "closed:1", "mode": "memory"})),
            bytes_per_tx_param: Some("size_bytes"),
            ..WorkloadSpec::windowed(
                &[Mode::Memory],
                TransactionName { one: "echo", many: "echoes" },
            )
        }
    }

    fn parse(&self, _: &str, params: &Params, _: &Common) -> Result<usize, String> {
        Ok(number(params, "size_bytes", 64, 1..=1 << 20)? as usize)
    }

    fn check(&self, _: &usize, _: &dyn Backend) -> Result<(), String> {
        Ok(())
    }

    fn run(&self, size: &usize, case: &WorkloadCase, _: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
        let size = *size;
        let make = || {
            let message: Vec<u8> = (0..size).map(|i| i as u8).collect();
            let mut copy = vec![0u8; size];
            Ok(Box::new(move || {
                copy.copy_from_slice(std::hint::black_box(&message));
                if copy == message { Ok(()) } else { Err(BackendError::Failed("the echo differs".into())) }
            }) as TxnFn)
        };
        match run_load(make, case.common.load, warmup, budget) {
            Ok(lm) => Finish::Ok(Outcome {
                measured: Measured::of_load(&lm, size),
                validation: Some(Validation { kat: "not applicable (a test workload: each echo is compared with its message)".into(), ..Validation::default() }),
                detail: WorkloadDetail::Plain(PlainResult {}),
            }),
            Err(e) => Finish::Invalid(format!("echo failed while measured: {e}"), None),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Through the protocol, as the orchestrator would: hello announces `echo` with its spec,
    /// `check` supports it, and `run` returns a result with the workload's fields.
    #[test]
    fn a_workload_of_one_file_and_one_registry_line_runs_end_to_end() {
        let requests = [
            r#"{"type":"hello","protocol":1}"#,
            r#"{"type":"check","id":"c","backend":"mock","op":"echo","params":{"size_bytes":128}}"#,
            r#"{"type":"run","id":"r","backend":"mock","op":"echo","params":{"size_bytes":128,"load":"closed:2"},"warmup_s":0.01,"seconds":0.05}"#,
            r#"{"type":"run","id":"x","backend":"mock","op":"echo","params":{"mode":"socket"}}"#,
        ];
        let mut out = Vec::new();
        crate::protocol::serve(requests.join("\n").as_bytes(), &mut out).unwrap();
        let out: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let hello = &out[0];
        assert!(hello["ops"].as_array().unwrap().contains(&"echo".into()));
        let entry = &hello["op_params"]["echo"];
        assert_eq!(entry["workload"], true);
        assert_eq!(entry["params"], serde_json::json!(["size_bytes", "load", "mode"]));
        assert_eq!(entry["modes"], serde_json::json!(["memory"]));
        assert_eq!(entry["default_size_bytes"], 64);
        assert_eq!(out[1]["status"], "supported", "{}", out[1]);
        let r = &out[2];
        assert_eq!((r["type"].as_str(), r["status"].as_str()), (Some("result"), Some("ok")), "{r}");
        assert_eq!(r["workload"], "echo");
        assert_eq!(r["mode"], "memory");
        assert_eq!(r["load"]["concurrency"], 2);
        assert_eq!(r["bytes_per_op"], 128);
        assert!(r["ops"].as_u64().unwrap() > 0);
        assert_eq!(r["cpu_ns"].as_array().unwrap().len(), 2);
        assert_eq!((out[3]["type"].as_str(), out[3]["code"].as_str()), (Some("error"), Some("bad_params")));
        assert!(out[3]["message"].as_str().unwrap().contains("mode must be memory"), "{}", out[3]);
    }
}
