//! FIPS mode: which build this worker is, the FIPS build's start-up check, and which backends
//! can run in it.
//!
//! The FIPS build (`cargo build --no-default-features --features fips`, binary
//! `cryptoperf-worker-fips`) links the AWS-LC FIPS module instead of AWS-LC; it refuses to start
//! unless the module reports FIPS mode (`FIPS_mode() == 1`, via `aws_lc_rs::try_fips_mode`).
//! In it, OpenSSL runs with its FIPS provider loaded and FIPS properties as the default where
//! the host has that provider installed; otherwise, and for ring and RustCrypto, which have no
//! FIPS mode, every operation is "unsupported" with the reason, never measured as FIPS.

/// This worker's build: `"fips"` or `"default"` (reported in `hello`).
pub const BUILD: &str = if cfg!(feature = "fips") { "fips" } else { "default" };

/// `Err(reason)` when this is the FIPS build and its crypto module does not report FIPS mode;
/// always `Ok` in the default build.
pub fn startup_check() -> Result<(), String> {
    #[cfg(feature = "fips")]
    {
        aws_lc_rs::try_fips_mode().map_err(|e| {
            format!("the AWS-LC FIPS module does not report FIPS mode ({e}); refusing to run")
        })
    }
    #[cfg(not(feature = "fips"))]
    {
        Ok(())
    }
}

/// Why `backend` cannot run in FIPS mode in this build, or `None` when it can (always `None`
/// in the default build, where nothing claims FIPS mode). The `mock` backends pass, for tests.
pub fn unavailable(backend: &str) -> Option<String> {
    if !cfg!(feature = "fips") {
        return None;
    }
    match backend {
        "aws-lc" => None, // checked at start-up
        "openssl" => openssl_fips().err(),
        "ring" => Some("ring has no FIPS mode (the FIPS worker measures only FIPS-mode modules)".into()),
        "rustcrypto" => {
            Some("RustCrypto has no FIPS mode (the FIPS worker measures only FIPS-mode modules)".into())
        }
        _ => None,
    }
}

/// Whether `backend` runs in FIPS mode in this process (recorded as `fips` in `hello` and in
/// every result).
pub fn mode(backend: &str) -> bool {
    match backend {
        "aws-lc" => aws_lc_rs::try_fips_mode().is_ok(),
        "openssl" => cfg!(feature = "fips") && openssl_fips().is_ok(),
        _ => false,
    }
}

#[cfg(feature = "fips")]
fn openssl_fips() -> Result<(), String> {
    crate::backends::openssl::fips_provider().clone()
}

#[cfg(not(feature = "fips"))]
fn openssl_fips() -> Result<(), String> {
    Err("not the FIPS build".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_claims_fips_mode_exactly_when_it_is_the_fips_build() {
        assert_eq!(BUILD, if cfg!(feature = "fips") { "fips" } else { "default" });
        assert!(startup_check().is_ok(), "{:?}", startup_check());
        assert_eq!(mode("aws-lc"), cfg!(feature = "fips"));
        assert!(!mode("ring") && !mode("rustcrypto"));
    }

    #[test]
    fn libraries_without_fips_mode_are_refused_only_in_the_fips_build() {
        for backend in ["ring", "rustcrypto"] {
            let why = unavailable(backend);
            assert_eq!(why.is_some(), cfg!(feature = "fips"), "{backend}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains("no FIPS mode"), "{why}");
            }
        }
        assert_eq!(unavailable("aws-lc"), None);
        assert_eq!(unavailable("mock"), None);
        if cfg!(feature = "fips") {
            // OpenSSL: FIPS mode exactly when its provider loaded, else the reason says so.
            match unavailable("openssl") {
                None => assert!(mode("openssl")),
                Some(why) => {
                    assert!(why.contains("FIPS provider"), "{why}");
                    assert!(!mode("openssl"));
                }
            }
        } else {
            assert_eq!(unavailable("openssl"), None);
            assert!(!mode("openssl"));
        }
    }
}
