//! FIPS mode: which build this worker is, the FIPS build's start-up check, which backends can
//! run in it, and which operations the AWS-LC FIPS module approves ([`approval`]: a primitive
//! the module does not approve is timed, but flagged, never passed off under a FIPS name).
//!
//! The FIPS build (`cargo build --no-default-features --features fips`, binary
//! `cryptoperf-worker-fips`) links the AWS-LC FIPS module instead of AWS-LC; it refuses to start
//! unless the module reports FIPS mode (`FIPS_mode() == 1`, via `aws_lc_rs::try_fips_mode`).
//! In it, OpenSSL runs with its FIPS provider loaded and FIPS properties as the default where
//! the host has that provider installed; otherwise, and for ring and RustCrypto, which have no
//! FIPS mode, every operation is "unsupported" with the reason, never measured as FIPS.

use crate::ops::{AeadAlg, DigestAlg, KeyGenAlg, KxAlg, Op, Params, RawParams, SigAlg, PARAM_NAMES};

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

/// The environment variable naming the directory of an OpenSSL FIPS provider made by
/// `cryptoperf setup openssl-fips`: `fips.so`, its `fipsmodule.cnf` (`openssl fipsinstall`'s
/// output) and `openssl-fips.cnf`, the config that includes it and activates `fips` and
/// `base`. The orchestrator sets it for the FIPS build's worker process only.
pub const PROVIDER_ENV: &str = "CRYPTOPERF_OPENSSL_FIPS_PROVIDER";

/// The FIPS provider `backend` runs under, as the provider reports itself (`name version`,
/// e.g. "OpenSSL FIPS Provider 3.1.2"; recorded as `fips_provider`): `Some` only for OpenSSL
/// in FIPS mode.
pub fn provider(backend: &str) -> Option<String> {
    #[cfg(feature = "fips")]
    if backend == "openssl" {
        return openssl_provider().clone().ok();
    }
    let _ = backend;
    None
}

#[cfg(feature = "fips")]
fn openssl_fips() -> Result<(), String> {
    openssl_provider().clone().map(|_| ())
}

#[cfg(feature = "fips")]
extern "C" {
    // libcrypto 3.0+ (include/openssl/crypto.h, provider.h, params.h), not bound by openssl-sys.
    fn OSSL_LIB_CTX_load_config(ctx: *mut openssl_sys::OSSL_LIB_CTX, file: *const std::ffi::c_char) -> std::ffi::c_int;
    fn OSSL_PROVIDER_available(ctx: *mut openssl_sys::OSSL_LIB_CTX, name: *const std::ffi::c_char) -> std::ffi::c_int;
    fn OSSL_PROVIDER_get_params(prov: *const openssl_sys::OSSL_PROVIDER, params: *mut openssl_sys::OSSL_PARAM) -> std::ffi::c_int;
    fn OSSL_PARAM_construct_utf8_ptr(key: *const std::ffi::c_char, buf: *mut *mut std::ffi::c_char, bsize: usize) -> openssl_sys::OSSL_PARAM;
}

/// `name version` of the loaded provider `prov` (its `name` and `version` parameters).
///
/// # Safety
/// `prov` is a provider handle returned by `OSSL_PROVIDER_load`.
#[cfg(feature = "fips")]
unsafe fn provider_text(prov: *mut openssl_sys::OSSL_PROVIDER) -> String {
    let mut name: *mut std::ffi::c_char = std::ptr::null_mut();
    let mut version: *mut std::ffi::c_char = std::ptr::null_mut();
    let mut params = [
        OSSL_PARAM_construct_utf8_ptr(c"name".as_ptr(), &mut name, 0),
        OSSL_PARAM_construct_utf8_ptr(c"version".as_ptr(), &mut version, 0),
        openssl_sys::OSSL_PARAM_construct_end(),
    ];
    let text = |p: *mut std::ffi::c_char| {
        if p.is_null() { "?".to_string() } else { std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned() }
    };
    if OSSL_PROVIDER_get_params(prov, params.as_mut_ptr()) != 1 {
        return "OpenSSL FIPS provider (it does not report its name)".into();
    }
    format!("{} {}", text(name), text(version))
}

/// Load the provider `cryptoperf setup openssl-fips` made, in `dir` ([`PROVIDER_ENV`]): its
/// directory becomes the default provider search path and its `openssl-fips.cnf` is loaded
/// into the default library context, which activates `fips` (running its self-tests against
/// `fipsmodule.cnf`) and `base`. `Err` when the config is missing or the provider is not active.
///
/// # Safety
/// Library calls on the default (NULL) library context, once per process.
#[cfg(feature = "fips")]
unsafe fn load_built_provider(dir: &str) -> Result<(), String> {
    let conf = std::path::Path::new(dir).join("openssl-fips.cnf");
    if !conf.is_file() || !std::path::Path::new(dir).join("fipsmodule.cnf").is_file() {
        return Err(format!(
            "{PROVIDER_ENV}={dir} has no openssl-fips.cnf and fipsmodule.cnf (run `cryptoperf setup openssl-fips --force`): \
             OpenSSL cannot run in FIPS mode here"
        ));
    }
    let cstr = |s: &str| std::ffi::CString::new(s).map_err(|_| format!("{PROVIDER_ENV} holds a NUL byte"));
    let (dir_c, conf_c) = (cstr(dir)?, cstr(&conf.to_string_lossy())?);
    openssl_sys::OSSL_PROVIDER_set_default_search_path(std::ptr::null_mut(), dir_c.as_ptr());
    let loaded = OSSL_LIB_CTX_load_config(std::ptr::null_mut(), conf_c.as_ptr()) == 1;
    if !loaded || OSSL_PROVIDER_available(std::ptr::null_mut(), c"fips".as_ptr()) != 1 {
        let errors = openssl::error::ErrorStack::get();
        let first = errors.errors().iter().rev().find_map(|e| e.reason()).unwrap_or("no error reported");
        return Err(format!(
            "OpenSSL's FIPS provider in {dir} is not active after loading {} ({first}): OpenSSL cannot run in FIPS mode here",
            conf.display()
        ));
    }
    Ok(())
}

/// In the FIPS worker: load OpenSSL's FIPS provider (and the base provider, for key encoders)
/// into the default library context and make `fips=yes` the default property query, once per
/// process, so every algorithm the backend fetches comes from the FIPS provider. With
/// [`PROVIDER_ENV`] set, the provider `cryptoperf setup openssl-fips` made is loaded through its
/// config (`load_built_provider`), and nothing else is tried when that fails; otherwise the
/// host's installed provider is. `Ok` is the provider's `name version`; `Err` says why not: the
/// provider is not installed on this host (Debian's OpenSSL ships none), its config is missing,
/// or it failed its self-tests. The providers stay loaded for the life of the process.
#[cfg(feature = "fips")]
fn openssl_provider() -> &'static std::result::Result<String, String> {
    static ONCE: std::sync::OnceLock<std::result::Result<String, String>> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        openssl::init();
        // SAFETY: plain library calls on the default (NULL) library context; the returned
        // provider handles are deliberately never unloaded.
        unsafe {
            if let Ok(dir) = std::env::var(PROVIDER_ENV) {
                if let Err(why) = load_built_provider(&dir) {
                    // As below: OpenSSL stays usable as a cross-check reference, never as FIPS.
                    openssl_sys::OSSL_PROVIDER_load(std::ptr::null_mut(), c"default".as_ptr());
                    let _ = openssl::error::ErrorStack::get();
                    return Err(why);
                }
            }
            let fips = openssl_sys::OSSL_PROVIDER_load(std::ptr::null_mut(), c"fips".as_ptr());
            if fips.is_null() {
                let errors = openssl::error::ErrorStack::get();
                // A failed explicit load leaves OpenSSL without its implicit default provider;
                // load it, so OpenSSL still serves as a cross-check reference for the FIPS
                // module's results (its own cells are refused with the reason below).
                openssl_sys::OSSL_PROVIDER_load(std::ptr::null_mut(), c"default".as_ptr());
                let _ = openssl::error::ErrorStack::get();
                // Where OpenSSL looks for providers: $OPENSSL_MODULES, else its build-time
                // OPENSSL_MODULES_DIR (OpenSSL_version type 8, include/openssl/crypto.h).
                let dir = std::env::var("OPENSSL_MODULES").unwrap_or_else(|_| {
                    std::ffi::CStr::from_ptr(openssl_sys::OpenSSL_version(8)).to_string_lossy().into_owned()
                });
                let dir = dir.strip_prefix("MODULESDIR: ").unwrap_or(&dir).trim_matches('"').to_string();
                let file = std::path::Path::new(&dir).join("fips.so");
                return Err(if file.exists() {
                    let first = errors.errors().first().and_then(|e| e.reason()).unwrap_or("unknown error");
                    format!("OpenSSL's FIPS provider {} failed to load ({first}): OpenSSL cannot run in FIPS mode here", file.display())
                } else {
                    format!(
                        "OpenSSL's FIPS provider is not installed on this host (no {}; Debian's OpenSSL \
                         ships none): OpenSSL cannot run in FIPS mode here",
                        file.display()
                    )
                });
            }
            if openssl_sys::OSSL_PROVIDER_load(std::ptr::null_mut(), c"base".as_ptr()).is_null()
                || openssl_sys::EVP_default_properties_enable_fips(std::ptr::null_mut(), 1) != 1
            {
                return Err(format!(
                    "OpenSSL's FIPS provider loaded but FIPS properties could not be set: {}",
                    openssl::error::ErrorStack::get()
                ));
            }
            Ok(provider_text(fips))
        }
    })
}


#[cfg(not(feature = "fips"))]
fn openssl_fips() -> Result<(), String> {
    Err("not the FIPS build".into())
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

/// The `fips_approved` and `fips_reason` of a `run` result: approved only when the library
/// ran in FIPS mode (`fips`) and the module approves the operation with these parameters.
pub fn run_fields(fips: bool, op: Op, params: &Params) -> (bool, Option<String>) {
    if !fips {
        return (false, Some("the library did not run in FIPS mode".into()));
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
        assert_eq!(run_fields(true, op, &params), (true, None));
        assert!(!run_fields(false, op, &params).0);
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
