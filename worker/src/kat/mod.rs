//! Known-answer tests and cross-backend checks, run before any case is timed.
//! PLACEHOLDER with the agreed API only (being written): until then every case is refused.

use crate::backends::{Backend, BackendError};
use crate::ops::{Op, Params};

/// One cross-backend check.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CrossCheck {
    pub with: String,
    pub status: &'static str,
    pub detail: String,
}

/// Outcome of validating a case.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Validation {
    pub kat: String,
    pub kat_source: String,
    pub cross_checks: Vec<CrossCheck>,
}

impl Validation {
    /// true when the KAT passed (or is not applicable) and no cross check failed.
    pub fn passed(&self) -> bool {
        (self.kat == "pass" || self.kat.starts_with("not applicable"))
            && self.cross_checks.iter().all(|c| c.status != "fail")
    }
    /// A one-line reason when `!passed()`.
    pub fn failure(&self) -> Option<String> {
        (!self.passed()).then(|| format!("known-answer test: {}", self.kat))
    }
}

/// Validate `backend` for `op` with `params` before timing.
pub fn validate(backend: &dyn Backend, _op: Op, _params: &Params) -> Result<Validation, BackendError> {
    let mock = backend.info().backend == "mock";
    Ok(Validation {
        kat: if mock { "not applicable (mock)".into() } else { "fail: validation not implemented yet".into() },
        kat_source: String::new(),
        cross_checks: vec![],
    })
}
