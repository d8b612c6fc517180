//! OpenSSL in the FIPS worker: loading OpenSSL's FIPS provider (the one `cryptoperf setup
//! openssl-fips` built, or the host's), what the provider reports itself as, and which
//! operations it refuses ([`refusal`]: not carried by the provider, or carried but outside its
//! approved services), so that nothing is measured under a FIPS name that the provider does
//! not offer as approved.

use crate::ops::{AeadAlg, DigestAlg, KeyGenAlg, KxAlg, Op, Params, SigAlg, SigFamily};

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
pub(super) fn openssl_fips() -> Result<(), String> {
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

/// `name version` of the loaded provider `prov` (its `name`, `version` and `buildinfo`
/// parameters; the build info is added, `(build …)`, where it is not the version).
///
/// # Safety
/// `prov` is a provider handle returned by `OSSL_PROVIDER_load`.
#[cfg(feature = "fips")]
unsafe fn provider_text(prov: *mut openssl_sys::OSSL_PROVIDER) -> String {
    let mut name: *mut std::ffi::c_char = std::ptr::null_mut();
    let mut version: *mut std::ffi::c_char = std::ptr::null_mut();
    let mut buildinfo: *mut std::ffi::c_char = std::ptr::null_mut();
    let mut params = [
        OSSL_PARAM_construct_utf8_ptr(c"name".as_ptr(), &mut name, 0),
        OSSL_PARAM_construct_utf8_ptr(c"version".as_ptr(), &mut version, 0),
        OSSL_PARAM_construct_utf8_ptr(c"buildinfo".as_ptr(), &mut buildinfo, 0),
        openssl_sys::OSSL_PARAM_construct_end(),
    ];
    let text = |p: *mut std::ffi::c_char| {
        if p.is_null() { "?".to_string() } else { std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned() }
    };
    if OSSL_PROVIDER_get_params(prov, params.as_mut_ptr()) != 1 {
        return "OpenSSL FIPS provider (it does not report its name)".into();
    }
    // The build info is the version for a release build ("3.1.2"); a vendor's differs.
    let (version, buildinfo) = (text(version), text(buildinfo));
    match buildinfo.as_str() {
        "?" => format!("{} {version}", text(name)),
        b if b == version => format!("{} {version}", text(name)),
        b => format!("{} {version} (build {b})", text(name)),
    }
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
pub(super) fn openssl_fips() -> Result<(), String> {
    Err("not the FIPS build".into())
}

/// Why OpenSSL's FIPS provider does not serve `op` with `params` as an approved service, or
/// `None` when it does; only consulted when OpenSSL runs in FIPS mode ([`refusal`]).
///
/// Checked against the OpenSSL 3.1.2 FIPS provider built by `cryptoperf setup openssl-fips`
/// (its `openssl list -*-algorithms` under `fips=yes`, and each case run through it; a test
/// in the FIPS build holds this table to the provider): it does not carry ChaCha20-Poly1305,
/// EdDSA, ML-KEM or ML-DSA, refuses SHA-1 for signing ("digest not allowed"), and carries
/// X25519 outside NIST's key-agreement schemes. RSA below 2048 bits is not an operation here
/// at all (`Op::parse` refuses `rsa1024-*`). Errors: none.
fn provider_refusal(op: Op, params: &Params) -> Option<&'static str> {
    const CHACHA: &str = "ChaCha20-Poly1305 is not in OpenSSL's FIPS provider (no NIST standard specifies it)";
    const EDDSA: &str = "Ed25519 is not in the OpenSSL 3.1 FIPS provider (it carries no EdDSA; FIPS 186-5 \
                         added EdDSA after that provider's validation)";
    const PQ: &str = "ML-KEM and ML-DSA are not in the OpenSSL 3.1 FIPS provider (FIPS 203/204, August 2024, \
                      came after it; OpenSSL has them from 3.5)";
    const X25519: &str = "X25519 (RFC 7748) is not an SP 800-56A Rev. 3 key agreement (FIPS 140-3 IG D.F): \
                          OpenSSL's FIPS provider carries it, but not as an approved service";
    const SHA1_SIGN: &str = "SHA-1 is disallowed for digital signature generation (SP 800-131A Rev. 2 §9); \
                             OpenSSL's FIPS provider refuses it (\"digest not allowed\")";
    match op {
        Op::Seal(AeadAlg::ChaCha20Poly1305) | Op::Open(AeadAlg::ChaCha20Poly1305) => Some(CHACHA),
        Op::Sign(SigFamily::Ed25519) | Op::Verify(SigFamily::Ed25519) => Some(EDDSA),
        Op::Sign(SigFamily::MlDsa(_)) | Op::Verify(SigFamily::MlDsa(_)) | Op::Keygen(KeyGenAlg::Sig(_)) => Some(PQ),
        Op::Encaps(_) | Op::Decaps(_) | Op::Keygen(KeyGenAlg::Kem(_)) => Some(PQ),
        Op::Derive(KxAlg::X25519) | Op::DeriveValidated(KxAlg::X25519) | Op::Keygen(KeyGenAlg::Kx(KxAlg::X25519)) => {
            Some(X25519)
        }
        Op::Sign(family) => match params.sig_alg(family) {
            SigAlg::Rsa { digest: DigestAlg::Sha1, .. }
            | SigAlg::EcdsaP256 { digest: DigestAlg::Sha1 }
            | SigAlg::EcdsaP384 { digest: DigestAlg::Sha1 } => Some(SHA1_SIGN),
            _ => None,
        },
        _ => None,
    }
}

/// Why `backend` will not run `op` with `params` in this process: `Some` only for OpenSSL
/// running under its FIPS provider ([`super::mode`]) and an operation the provider does not
/// offer as an approved service (see `provider_refusal`); the cell is then `unsupported` with
/// this reason, never timed under a FIPS name.
pub fn refusal(backend: &str, op: Op, params: &Params) -> Option<String> {
    if backend != "openssl" || !super::mode("openssl") {
        return None;
    }
    provider_refusal(op, params).map(str::to_string)
}

/// Where OpenSSL's FIPS provider and the AWS-LC FIPS module differ on an operation both run
/// (`Some(approved)`), else `None` and the AWS-LC table answers ([`super::approval`]):
/// finite-field DH over RFC 3526 group 14 (MODP-2048) is a safe-prime group of SP 800-56A
/// Rev. 3 (Appendix D) that OpenSSL's FIPS provider serves, where AWS-LC's module offers DH
/// only as a non-approved service.
pub(super) fn differs(op: Op) -> Option<bool> {
    match op {
        Op::Derive(KxAlg::Ffdh2048) | Op::DeriveValidated(KxAlg::Ffdh2048) | Op::Keygen(KeyGenAlg::Kx(KxAlg::Ffdh2048)) => {
            Some(true)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{RawParams, ALL_OPS};

    fn refused(name: &str, digest: Option<&str>) -> Option<&'static str> {
        let op = Op::parse(name).expect("canonical name");
        let raw = RawParams { digest: digest.map(str::to_string), ..RawParams::default() };
        provider_refusal(op, &Params::resolve(op, &raw).expect("resolves"))
    }

    /// The list the docs give, case by case, each with a reason naming why.
    #[test]
    fn the_provider_refuses_what_it_does_not_approve_and_nothing_else() {
        for (name, word) in [("chacha20-poly1305-seal", "ChaCha20"), ("chacha20-poly1305-open", "ChaCha20"),
                             ("ed25519-sign", "EdDSA"), ("ed25519-verify", "EdDSA"),
                             ("x25519-derive", "SP 800-56A"), ("x25519-keygen", "SP 800-56A"),
                             ("ml-kem-768-encaps", "ML-KEM"), ("x25519mlkem768-keygen", "ML-KEM"),
                             ("ml-dsa-65-sign", "ML-DSA"), ("ml-dsa-44-keygen", "ML-DSA")] {
            let why = refused(name, None).unwrap_or_else(|| panic!("{name} is not refused"));
            assert!(why.contains(word), "{name}: {why}");
        }
        assert!(refused("rsa2048-sign", Some("sha1")).unwrap().contains("SP 800-131A"));
        assert!(refused("ecdsa-p256-sign", Some("sha1")).is_some());
        for name in ["rsa2048-sign", "rsa4096-sign", "ecdsa-p256-sign", "ecdsa-p384-verify", "aes-256-gcm-seal",
                     "aes-128-gcm-open", "sha1", "sha256", "sha3-256", "hmac-sha256", "ecdh-p256-derive",
                     "ffdh-2048-derive"] {
            assert_eq!(refused(name, None), None, "{name}");
        }
        // SHA-1 stays allowed for verifying legacy signatures (SP 800-131A Rev. 2 §9).
        assert_eq!(refused("rsa2048-verify", Some("sha1")), None);
        // Every operation has an answer; only OpenSSL in FIPS mode is ever refused.
        for name in ALL_OPS {
            let op = Op::parse(name).unwrap();
            let params = Params::resolve(op, &RawParams::default()).unwrap();
            assert_eq!(refusal("aws-lc", op, &params), None, "{name}");
            if !super::super::mode("openssl") {
                assert_eq!(refusal("openssl", op, &params), None, "{name}");
            }
        }
    }
}
