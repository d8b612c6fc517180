//! `cryptoperf-worker-fips`: the worker built with the `fips` feature (the AWS-LC FIPS module),
//! refusing to start unless the module reports FIPS mode. See src/lib.rs and src/fips.rs.

fn main() {
    std::process::exit(cryptoperf_worker::main(std::env::args().skip(1).collect()));
}
