//! No build step: this script exists so that cargo compiles the build-dependencies listed in
//! Cargo.toml (`bindgen`, `regex`, `cc` with the features aws-lc-fips-sys's build uses) in every
//! build of the worker, so that the FIPS and the default build, made one after the other by
//! `pip install .` in the same target directory, share them instead of rebuilding them and
//! everything that depends on them.

use bindgen as _;
use regex as _;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
