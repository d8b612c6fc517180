//! `cryptoperf-worker`: measures crypto operations on request, speaking the JSON-lines protocol
//! of docs/worker-protocol.md on stdin/stdout. Logs go to stderr only. The orchestrator
//! (`cryptoperf`) starts it; run by hand it is useful for `--hello`.

mod backends;
mod cpu;
mod kat;
mod measure;
mod ops;
mod protocol;

use std::io::Write;

const USAGE: &str = "\
cryptoperf-worker: the measuring half of cryptoperf (started by `cryptoperf`, not by hand)

usage: cryptoperf-worker            serve protocol v1 on stdin/stdout (docs/worker-protocol.md)
       cryptoperf-worker --hello    print the capabilities (backends, library versions,
                                    supported operations) as JSON and exit
       cryptoperf-worker --version  print the version and protocol version
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => match protocol::serve(std::io::stdin().lock(), std::io::stdout().lock()) {
            Ok(code) => code,
            // The orchestrator went away (broken pipe): nothing left to tell anyone.
            Err(e) => {
                eprintln!("cryptoperf-worker: {e}");
                1
            }
        },
        ["--hello"] => {
            let request = br#"{"type":"hello","protocol":1,"detail":true}"#;
            let mut out = Vec::new();
            let code = protocol::serve(&request[..], &mut out).unwrap_or(1);
            let hello: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", serde_json::to_string_pretty(&hello).unwrap_or_default());
            code
        }
        ["--version"] => {
            println!("cryptoperf-worker {} (protocol {})", env!("CARGO_PKG_VERSION"), protocol::PROTOCOL_VERSION);
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
    };
    std::process::exit(code);
}
