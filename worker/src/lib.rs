//! `cryptoperf-worker`: measures crypto operations on request, speaking the JSON-lines protocol
//! of docs/worker-protocol.md on stdin/stdout. Logs go to stderr only. The orchestrator
//! (`cryptoperf`) starts it; run by hand it is useful for `--hello`.
//!
//! Two binaries run [`main`]: `cryptoperf-worker` (src/main.rs) and, built with the `fips`
//! feature, `cryptoperf-worker-fips` (src/bin/fips.rs), whose AWS-LC is the FIPS module; which
//! one a process is, is [`fips::BUILD`].

mod backends;
mod cpu;
pub mod fips;
mod kat;
mod measure;
mod ops;
mod protocol;
mod result;
mod workloads;

use std::io::Write;

const USAGE: &str = "\
cryptoperf-worker: the measuring half of cryptoperf (started by `cryptoperf`, not by hand)

usage: cryptoperf-worker            serve protocol v1 on stdin/stdout (docs/worker-protocol.md)
       cryptoperf-worker --hello    print the capabilities (backends, library versions,
                                    supported operations) as JSON and exit
       cryptoperf-worker --version  print the version and protocol version
       cryptoperf-worker --result-schema
                                    print the JSON Schema of the `result` message
       cryptoperf-worker --serve-workload
                                    the server side of a socket workload (started by a
                                    worker for its own run, not by hand; docs/worker-protocol.md)
       cryptoperf-worker --fleet-slice
                                    one slice of a fleet-job's management side (started by a
                                    worker for its own run, not by hand; docs/worker-protocol.md)
       cryptoperf-worker --merge-jobs
                                    merge a fleet-job's sub-jobs' results (stdin, one a line)
                                    into the job's one result (docs/worker-protocol.md)
";

/// The worker's command line (`args` without the program name); returns the exit status.
/// The FIPS build refuses to start (status 1, one line on stderr) unless its crypto module
/// reports FIPS mode ([`fips::startup_check`]).
pub fn main(args: Vec<String>) -> i32 {
    if let Err(why) = fips::startup_check() {
        eprintln!("cryptoperf-worker-fips: {why}");
        return 1;
    }
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => match protocol::serve(std::io::stdin().lock(), std::io::stdout().lock()) {
            Ok(code) => code,
            // The orchestrator went away (broken pipe): nothing left to tell anyone.
            Err(e) => {
                eprintln!("cryptoperf-worker: {e}");
                1
            }
        },
        [workloads::server::FLAG] => workloads::serve_workload(),
        [workloads::fleet_job::SLICE_FLAG] => workloads::fleet_job::slice_main(),
        [workloads::fleet_job::MERGE_FLAG] => workloads::fleet_job::merge_main(),
        ["--hello"] => {
            let request = br#"{"type":"hello","protocol":1,"detail":true}"#;
            let mut out = Vec::new();
            let code = protocol::serve(&request[..], &mut out).unwrap_or(1);
            let hello: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", serde_json::to_string_pretty(&hello).unwrap_or_default());
            code
        }
        ["--result-schema"] => {
            print!("{}", result::schema_text());
            0
        }
        ["--version"] => {
            println!(
                "cryptoperf-worker {} (protocol {}, build {})",
                env!("CARGO_PKG_VERSION"),
                protocol::PROTOCOL_VERSION,
                fips::BUILD
            );
            0
        }
        ["--help" | "-h"] => {
            print!("{USAGE}");
            0
        }
        _ => {
            eprint!("cryptoperf-worker: unknown arguments {args:?}\n\n{USAGE}");
            2
        }
    }
}
