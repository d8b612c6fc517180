//! `cryptoperf-worker`: see the library (src/lib.rs) and docs/worker-protocol.md.

fn main() {
    std::process::exit(cryptoperf_worker::main(std::env::args().skip(1).collect()));
}
