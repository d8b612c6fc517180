//! The ring backend (stub: every operation unsupported until implemented).

use super::{Backend, LibraryInfo};

/// The ring library.
pub struct Ring;

impl Backend for Ring {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "ring",
            library: "ring".into(),
            library_version: "unknown".into(),
            fips: false,
        }
    }
}
