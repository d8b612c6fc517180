//! What the CPU offers for crypto, read from `/proc/cpuinfo`.

use serde::Serialize;

/// Flags that change crypto speed: AES-NI, carry-less multiply (GHASH), SHA extensions, the
/// vector extensions the libraries' assembly uses, and big-number helpers (BMI2/ADX for RSA).
pub const CRYPTO_FLAGS: &[&str] = &[
    "aes", "pclmulqdq", "sha_ni", "avx", "avx2", "avx512f", "vaes", "vpclmulqdq", "bmi2", "adx",
];

/// The CPU as the `hello` message describes it.
#[derive(Clone, Debug, Serialize)]
pub struct CpuInfo {
    /// `model name` of the first processor, or "unknown".
    pub model: String,
    /// The [`CRYPTO_FLAGS`] present, in that order.
    pub flags: Vec<&'static str>,
    /// Logical CPUs the OS reports.
    pub logical_cpus: usize,
    /// Whether the TSC is invariant (`constant_tsc` and `nonstop_tsc`), so reference cycles are
    /// reported.
    pub tsc: bool,
}

impl CpuInfo {
    /// Read `/proc/cpuinfo`; fields fall back to "unknown"/empty where it is missing.
    pub fn read() -> CpuInfo {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find(|l| l.split(':').next().map(str::trim) == Some(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let flags_line = field("flags").unwrap_or_default();
        let present: Vec<&str> = flags_line.split_whitespace().collect();
        CpuInfo {
            model: field("model name").unwrap_or_else(|| "unknown".into()),
            flags: CRYPTO_FLAGS.iter().copied().filter(|f| present.contains(f)).collect(),
            logical_cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            tsc: cfg!(target_arch = "x86_64")
                && present.contains(&"constant_tsc")
                && present.contains(&"nonstop_tsc"),
        }
    }
}
