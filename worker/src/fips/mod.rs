//! FIPS mode: which build this worker is, the FIPS build's start-up check, which backends can
//! run in it, and which operations the AWS-LC FIPS module approves ([`approval`]: a primitive
//! the module does not approve is timed, but flagged, never passed off under a FIPS name).
//!
//! The FIPS build (`cargo build --no-default-features --features fips`, binary
//! `cryptoperf-worker-fips`) links the AWS-LC FIPS module instead of AWS-LC; it refuses to start
//! unless the module reports FIPS mode (`FIPS_mode() == 1`, via `aws_lc_rs::try_fips_mode`).
//! In it, OpenSSL runs with its FIPS provider loaded and FIPS properties as the default
//! ([`openssl_provider`]: the provider `cryptoperf setup openssl-fips` built, or the host's),
//! and an operation that provider does not serve as approved is refused ([`refusal`]); without
//! an active provider, and for ring and RustCrypto, which have no FIPS mode, every operation is
//! "unsupported" with the reason, never measured as FIPS.

use crate::ops::{AeadAlg, DigestAlg, KeyGenAlg, KxAlg, Op, Params, RawParams, SigAlg, PARAM_NAMES};

mod openssl_provider;
use openssl_provider::openssl_fips;
pub use openssl_provider::{provider, refusal, PROVIDER_ENV};

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

/// Whether the AWS-LC FIPS module approves an operation, with these parameters, as the worker
/// times it: an approved service of the module, or not, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    Approved,
    /// Not an approved service; the reason names the rule (NIST publication and section) or the
    /// module's own indication.
    NotApproved(String),
}

/// The AWS-LC FIPS module's approval of `op` with `params`, as the worker times it.
///
/// The source is the module's own FIPS service indicator — the approved services are those
/// after which it sets its indicator (aws-lc-fips-sys 0.14.4, AWS-LC-FIPS 4.2.0,
/// `crypto/fipsmodule/service_indicator/service_indicator.c` and the calls into it) — and the
/// NIST rules it implements, cited per case. In the FIPS build a test runs every operation on
/// the module between `FIPS_service_indicator_before_call` and `_after_call` and holds this
/// table to what the module indicates. Errors: none (every operation has an answer).
pub fn approval(op: Op, params: &Params) -> Approval {
    let not = |why: &str| Approval::NotApproved(why.to_string());
    match op {
        // SHA-1 hashing stays approved for non-signature uses (SP 800-131A Rev. 2 §9).
        Op::Digest(_) | Op::Hmac(_) => Approval::Approved,
        Op::Seal(AeadAlg::ChaCha20Poly1305) | Op::Open(AeadAlg::ChaCha20Poly1305) => {
            not("ChaCha20-Poly1305 is not a FIPS-approved algorithm (no NIST standard specifies it); the module offers it as a non-approved service")
        }
        Op::Seal(_) => not(
            "AES-GCM encryption with a nonce chosen outside the module is not an approved service \
             (SP 800-38D §8.2.2, FIPS 140-3 IG C.H: the IV is generated inside the module or by the \
             TLS 1.2/1.3 nonce construction); the arithmetic timed is the same, opening is approved",
        ),
        Op::Open(_) => Approval::Approved,
        Op::Sign(family) => match params.sig_alg(family) {
            SigAlg::Rsa { digest: DigestAlg::Sha1, .. }
            | SigAlg::EcdsaP256 { digest: DigestAlg::Sha1 }
            | SigAlg::EcdsaP384 { digest: DigestAlg::Sha1 } => {
                not("SHA-1 is disallowed for digital signature generation (SP 800-131A Rev. 2 §9)")
            }
            // RSA ≥ 2048 bits and ECDSA P-256/P-384 with SHA-2 or SHA-3 (FIPS 186-5), Ed25519
            // (FIPS 186-5 §7), ML-DSA (FIPS 204).
            _ => Approval::Approved,
        },
        // SHA-1 stays allowed for verifying legacy signatures (SP 800-131A Rev. 2 §9).
        Op::Verify(_) => Approval::Approved,
        Op::Derive(kx) | Op::DeriveValidated(kx) | Op::Keygen(KeyGenAlg::Kx(kx)) => match kx {
            KxAlg::X25519 => not(
                "X25519 (RFC 7748) is not an SP 800-56A Rev. 3 key agreement: Curve25519 is not one \
                 of its curves (FIPS 140-3 IG D.F)",
            ),
            KxAlg::EcdhP256 => Approval::Approved,
            KxAlg::Ffdh2048 => not(
                "the AWS-LC FIPS module offers finite-field DH as a non-approved service only (its \
                 DH functions never set the FIPS service indicator)",
            ),
        },
        // ML-KEM (FIPS 203); X25519MLKEM768's key establishment is its ML-KEM-768, the X25519
        // secret joining it as an auxiliary secret (SP 800-56C Rev. 2 §2: Z' = Z ‖ T).
        Op::Encaps(_) | Op::Decaps(_) | Op::Keygen(KeyGenAlg::Kem(_)) => Approval::Approved,
        // ML-DSA key generation (FIPS 204).
        Op::Keygen(KeyGenAlg::Sig(_)) => Approval::Approved,
    }
}

/// `hello`'s per-operation FIPS entry: the module's approval with the default parameters
/// (`approved`, and `reason` when not), and `not_approved_with`: for each parameter whose
/// value changes the answer, the values under which the operation is not approved, each with
/// its reason — e.g. `rsa2048-sign`: `{"digest": {"sha1": "SHA-1 is disallowed …"}}` — so a
/// plan can flag a cell from `hello` alone.
pub fn hello_entry(op: Op) -> serde_json::Value {
    let default = Params::resolve(op, &RawParams::default()).expect("defaults resolve");
    let mut entry = match approval(op, &default) {
        Approval::Approved => serde_json::json!({"approved": true, "reason": null}),
        Approval::NotApproved(r) => serde_json::json!({"approved": false, "reason": r}),
    };
    let mut varied = serde_json::Map::new();
    for name in op.param_names().into_iter().filter(|n| *n != PARAM_NAMES[0]) {
        let values: Vec<&str> = match name {
            "digest" => DigestAlg::ALL.iter().map(|d| d.name()).collect(),
            _ => crate::ops::RsaPadding::ALL.iter().map(|p| p.name()).collect(),
        };
        let mut refused = serde_json::Map::new();
        for value in values {
            let raw = RawParams {
                digest: (name == "digest").then(|| value.to_string()),
                padding: (name == "padding").then(|| value.to_string()),
                ..RawParams::default()
            };
            let params = Params::resolve(op, &raw).expect("announced values resolve");
            if let Approval::NotApproved(r) = approval(op, &params) {
                refused.insert(value.to_string(), r.into());
            }
        }
        if !refused.is_empty() && entry["approved"] == true {
            varied.insert(name.to_string(), refused.into());
        }
    }
    entry["not_approved_with"] = varied.into();
    entry
}

/// The `fips_approved` and `fips_reason` of a `run` result: approved only when `backend`'s
/// library ran in FIPS mode (`fips`) and its module approves the operation with these
/// parameters ([`approval`], with OpenSSL's provider where it differs from AWS-LC's module).
pub fn run_fields(backend: &str, fips: bool, op: Op, params: &Params) -> (bool, Option<String>) {
    if !fips {
        return (false, Some("the library did not run in FIPS mode".into()));
    }
    if let Some(why) = refusal(backend, op, params) {
        return (false, Some(why));
    }
    if backend == "openssl" {
        if let Some(approved) = openssl_provider::differs(op) {
            return (approved, None);
        }
    }
    match approval(op, params) {
        Approval::Approved => (true, None),
        Approval::NotApproved(r) => (false, Some(r)),
    }
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

#[cfg(test)]
mod approval_tests {
    use super::*;
    use crate::ops::ALL_OPS;

    fn op_params(name: &str, digest: Option<&str>) -> (Op, Params) {
        let op = Op::parse(name).expect("canonical name");
        let raw = RawParams { digest: digest.map(str::to_string), ..RawParams::default() };
        (op, Params::resolve(op, &raw).expect("resolves"))
    }

    fn approved(name: &str, digest: Option<&str>) -> bool {
        let (op, params) = op_params(name, digest);
        approval(op, &params) == Approval::Approved
    }

    /// What NIST's rules and the module say, case by case; every refusal gives a reason.
    #[test]
    fn the_table_follows_the_rules_it_cites() {
        for name in ["x25519-keygen", "x25519-derive", "chacha20-poly1305-seal", "chacha20-poly1305-open",
                     "aes-128-gcm-seal", "aes-256-gcm-seal", "ffdh-2048-keygen", "ffdh-2048-derive",
                     "ffdh-2048-derive-validated"] {
            assert!(!approved(name, None), "{name}");
        }
        for name in ["sha1", "sha256", "hmac-sha256", "aes-128-gcm-open", "rsa2048-sign", "rsa3072-verify",
                     "ecdsa-p256-sign", "ecdsa-p384-verify", "ed25519-sign", "ml-dsa-65-sign", "ml-dsa-44-keygen",
                     "ecdh-p256-keygen", "ecdh-p256-derive", "ecdh-p256-derive-validated", "ml-kem-768-encaps",
                     "x25519mlkem768-keygen"] {
            assert!(approved(name, None), "{name}");
        }
        // SHA-1: refused for signing, allowed for verifying.
        assert!(!approved("rsa2048-sign", Some("sha1")) && !approved("ecdsa-p256-sign", Some("sha1")));
        assert!(approved("rsa2048-verify", Some("sha1")) && approved("rsa2048-sign", Some("sha512")));
        for name in ALL_OPS {
            let (op, params) = op_params(name, None);
            if let Approval::NotApproved(r) = approval(op, &params) {
                assert!(r.len() > 20, "{name}: {r}");
            }
        }
        let (op, params) = op_params("x25519-derive", None);
        assert!(matches!(approval(op, &params), Approval::NotApproved(r) if r.contains("SP 800-56A")));
    }

    /// `hello`'s entry says the default answer and which parameter values change it.
    #[test]
    fn hello_entries_name_the_values_that_are_not_approved() {
        let e = hello_entry(Op::parse("rsa2048-sign").unwrap());
        assert_eq!(e["approved"], true);
        let sha1 = &e["not_approved_with"]["digest"]["sha1"];
        assert!(sha1.as_str().unwrap().contains("SP 800-131A"), "{e}");
        assert_eq!(e["not_approved_with"]["digest"].as_object().unwrap().len(), 1, "{e}");
        assert!(e["not_approved_with"].get("padding").is_none(), "{e}");
        let e = hello_entry(Op::parse("rsa2048-verify").unwrap());
        assert_eq!(e["not_approved_with"], serde_json::json!({}));
        let e = hello_entry(Op::parse("x25519-keygen").unwrap());
        assert_eq!(e["approved"], false);
        assert!(e["reason"].as_str().unwrap().contains("RFC 7748"));
        // The result's fields: approved only in FIPS mode.
        let (op, params) = op_params("sha256", None);
        assert_eq!(run_fields("aws-lc", true, op, &params), (true, None));
        assert!(!run_fields("aws-lc", false, op, &params).0);
    }

    /// The table is the module's own answer: in the FIPS build, every operation the AWS-LC
    /// FIPS module runs is timed once between `FIPS_service_indicator_before_call` and
    /// `_after_call`, and the module's indicator must say what `approval` says.
    #[test]
    fn the_module_indicates_what_the_table_says() {
        if !cfg!(feature = "fips") {
            return;
        }
        #[cfg(feature = "fips")]
        {
            use crate::ops::prepare::prepare;
            use aws_lc_fips_sys::{FIPS_service_indicator_after_call, FIPS_service_indicator_before_call};
            let backend = crate::backends::by_name("aws-lc").unwrap();
            let mut checked = 0;
            for name in ALL_OPS {
                let op = Op::parse(name).unwrap();
                let digests: Vec<Option<&str>> = if op.takes_digest() { vec![None, Some("sha1")] } else { vec![None] };
                for digest in digests {
                    let (op, params) = op_params(name, digest);
                    let Ok(mut f) = prepare(&*backend, op, &params) else { continue };
                    f().unwrap(); // lazy self-tests run on first use, outside the check
                    // SAFETY: both calls only read this thread's indicator state.
                    let before = unsafe { FIPS_service_indicator_before_call() };
                    f().unwrap_or_else(|e| panic!("{name}: {e}"));
                    let after = unsafe { FIPS_service_indicator_after_call() };
                    let by_module = after != before;
                    assert_eq!(by_module, approval(op, &params) == Approval::Approved, "{name} {digest:?}: the module indicates {by_module}");
                    checked += 1;
                }
            }
            assert!(checked >= 40, "only {checked} operations checked");
        }
    }
}
