//! `cryptoperf-worker`: measures crypto operations on request (docs/worker-protocol.md).

mod backends;
mod ops;

fn main() {}
