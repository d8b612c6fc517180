//! The AWS-LC backend (stub: every operation unsupported until implemented).

use super::{Backend, LibraryInfo};

/// The AWS-LC library.
pub struct AwsLc;

impl Backend for AwsLc {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "aws-lc",
            library: "AWS-LC".into(),
            library_version: "unknown".into(),
            fips: false,
        }
    }
}
