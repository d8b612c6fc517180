//! The RustCrypto backend (stub: every operation unsupported until implemented).

use super::{Backend, LibraryInfo};

/// The RustCrypto library.
pub struct RustCrypto;

impl Backend for RustCrypto {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "rustcrypto",
            library: "RustCrypto".into(),
            library_version: "unknown".into(),
            fips: false,
        }
    }
}
