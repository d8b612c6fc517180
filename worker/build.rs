//! No build step: this script exists so that cargo compiles `bindgen` (a build-dependency, see
//! Cargo.toml) in the default build too. aws-lc-fips-sys always compiles it, so when
//! `pip install .` builds the FIPS worker right after the default one in the same target
//! directory, it finds bindgen and its dependencies already built instead of compiling them
//! before the AWS-LC FIPS module can start building.

use bindgen as _;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
