//! The OpenSSL backend (stub: every operation unsupported until implemented).

use super::{Backend, LibraryInfo};

/// The OpenSSL library.
pub struct OpenSsl;

impl Backend for OpenSsl {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "openssl",
            library: "OpenSSL".into(),
            library_version: "unknown".into(),
            fips: false,
        }
    }
}
