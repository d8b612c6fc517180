//! The scripted `mock` backend for tests: no crypto, only busy-waits of known length.
//! Placeholder: filled in with the measure loop.

use super::{Backend, LibraryInfo};

/// Scripted backend (tests only).
pub struct Mock;

impl Backend for Mock {
    fn info(&self) -> LibraryInfo {
        LibraryInfo { backend: "mock", library: "mock".into(), library_version: "0".into(), fips: false }
    }
}
