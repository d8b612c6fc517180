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

// ------------------------------------------------------------------ capability vectors and masks
//
// OpenSSL and AWS-LC choose their code paths from a *capability vector* they fill with CPUID
// at start-up and then modify from the environment variable `OPENSSL_ia32cap`. Its layout is
// documented in OpenSSL's man page OPENSSL_ia32cap(3) (OpenSSL 3.0,
// https://docs.openssl.org/3.0/man3/OPENSSL_ia32cap/; doc/man3/OPENSSL_ia32cap.pod):
//
// - word 0 (bits 0-63): CPUID.(EAX=1) EDX in bits 0-31, ECX in bits 32-63; "bit #33 denoting
//   availability of PCLMULQDQ instruction", "bit #57 denoting AES-NI instruction set
//   extension", #41 SSSE3, #54 MOVBE, #60 AVX;
// - word 1 ("bit #64+n", after ':' in the variable): CPUID.(EAX=7,ECX=0) EBX in bits 0-31, ECX
//   in bits 32-63; "#64+5 AVX2", "#64+16 AVX512F", "#64+29 SHA extension", "#64+41 VAES",
//   "#64+42 VPCLMULQDQ", #64+3 BMI1, #64+8 BMI2, #64+19 ADCX/ADOX, #64+17/21/30/31
//   AVX512DQ/IFMA/BW/VL.
//
// `~VALUE` clears the bits of VALUE from what CPUID reported. OpenSSL 3.0 (crypto/cpuid.c)
// sets word 1 to ZERO when the variable has no ':' part, so every mask below spells its words
// ("~0x...:~0x..."); AWS-LC (crypto/fipsmodule/cpucap/cpu_intel.c, OPENSSL_cpuid_setup and
// handle_cpu_env) parses the same syntax into its own OPENSSL_ia32cap_P and leaves word 1
// alone without ':'. docs/methodology.md, "CPU capability masks", has the table.
//
// Newer OpenSSL (3.6, the `vendored-openssl` build) keeps five 64-bit words: words 0 and 1 as
// above, then CPUID.(7,0) EDX, CPUID.(7,1) EAX/EDX/EBX/ECX and CPUID.(0x24,0) EBX (AVX-IFMA for
// RSA, SM3/SM4, AVX10), and its crypto/cpuid.c sets every word the variable does not spell to
// ZERO. So a mask spells all five words, the last three as `~0x0` (clear nothing): the same
// bits are cleared in every library. OpenSSL 3.0 and AWS-LC read the first two parts and stop.

/// One flag of the capability vector: name, word (0 or 1), bit within the 64-bit word.
#[derive(Clone, Copy, Debug)]
pub struct CapFlag {
    pub name: &'static str,
    pub word: usize,
    pub bit: u32,
}

const fn flag(name: &'static str, word: usize, bit: u32) -> CapFlag {
    CapFlag { name, word, bit }
}

/// The flags a result decodes from a capability vector (OPENSSL_ia32cap(3) bit numbers).
pub const CAP_FLAGS: &[CapFlag] = &[
    flag("sse2", 0, 26),
    flag("pclmulqdq", 0, 32 + 1),
    flag("ssse3", 0, 32 + 9),
    flag("movbe", 0, 32 + 22),
    flag("aes", 0, 32 + 25),
    flag("avx", 0, 32 + 28),
    flag("bmi1", 1, 3),
    flag("avx2", 1, 5),
    flag("bmi2", 1, 8),
    flag("avx512f", 1, 16),
    flag("avx512dq", 1, 17),
    flag("adx", 1, 19),
    flag("avx512ifma", 1, 21),
    flag("sha", 1, 29),
    flag("avx512bw", 1, 30),
    flag("avx512vl", 1, 31),
    flag("vaes", 1, 32 + 9),
    flag("vpclmulqdq", 1, 32 + 10),
];

/// The bits of the named flags, as the two words of a capability vector.
const fn bits(names: &[&str]) -> [u64; 2] {
    let mut out = [0u64; 2];
    let mut i = 0;
    while i < names.len() {
        let mut j = 0;
        let mut found = false;
        while j < CAP_FLAGS.len() {
            if const_eq(CAP_FLAGS[j].name, names[i]) {
                out[CAP_FLAGS[j].word] |= 1u64 << CAP_FLAGS[j].bit;
                found = true;
            }
            j += 1;
        }
        assert!(found, "unknown capability flag");
        i += 1;
    }
    out
}

const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A named CPU capability mask: which capability-vector bits it clears.
#[derive(Clone, Copy, Debug)]
pub struct CpuMask {
    pub name: &'static str,
    /// Flags cleared (their bits are `clears`).
    pub flags: &'static [&'static str],
    pub clears: [u64; 2],
    pub description: &'static str,
}

const AVX512: &[&str] = &["avx512f", "avx512dq", "avx512ifma", "avx512bw", "avx512vl"];

/// Every mask a study may name. `baseline` clears nothing: no variable at all.
pub const CPU_MASKS: &[CpuMask] = &[
    CpuMask { name: "baseline", flags: &[], clears: [0, 0], description: "no mask: every extension the CPU has" },
    CpuMask {
        name: "no-aesni",
        flags: &["aes", "pclmulqdq", "vaes", "vpclmulqdq"],
        clears: bits(&["aes", "pclmulqdq", "vaes", "vpclmulqdq"]),
        description: "AES-NI and carry-less multiply (PCLMULQDQ, and their VEX/EVEX forms VAES and \
                      VPCLMULQDQ): AES and GHASH both in software; masking AES-NI alone would \
                      leave GCM's GHASH on PCLMULQDQ",
    },
    CpuMask {
        name: "no-shani",
        flags: &["sha"],
        clears: bits(&["sha"]),
        description: "SHA extensions (SHA-1, SHA-256 fall back to SIMD code)",
    },
    CpuMask {
        name: "no-avx2",
        flags: &["avx2", "avx512f", "avx512dq", "avx512ifma", "avx512bw", "avx512vl"],
        clears: bits(&["avx2", "avx512f", "avx512dq", "avx512ifma", "avx512bw", "avx512vl"]),
        description: "AVX2 and AVX-512 (no integer vector code wider than 128 bits; AVX stays)",
    },
    CpuMask {
        name: "no-avx512",
        flags: AVX512,
        clears: bits(AVX512),
        description: "AVX-512 (F, DQ, IFMA, BW, VL)",
    },
];

/// The environment variable OpenSSL and AWS-LC read their capability mask from.
pub const MASK_ENV: &str = "OPENSSL_ia32cap";

/// Words a mask's `OPENSSL_ia32cap` value spells: as many as the newest OpenSSL a worker may be
/// built with reads (five in OpenSSL 3.6: `OPENSSL_IA32CAP_P_MAX_INDEXES` / 2).
pub const ENV_WORDS: usize = 5;

impl CpuMask {
    /// The mask called `name`, or `None`.
    pub fn by_name(name: &str) -> Option<&'static CpuMask> {
        CPU_MASKS.iter().find(|m| m.name == name)
    }

    /// The value of `OPENSSL_ia32cap` that applies this mask (`None` for `baseline`: unset).
    /// All [`ENV_WORDS`] words are always given, those past the second as `~0x0` (see the
    /// comment above: OpenSSL 3.0 zeroes word 1, OpenSSL 3.6 words 2-4, when not given).
    pub fn env_value(&self) -> Option<String> {
        if self.clears == [0, 0] {
            return None;
        }
        let rest = ":~0x0".repeat(ENV_WORDS - 2);
        Some(format!("~{:#x}:~{:#x}{rest}", self.clears[0], self.clears[1]))
    }

    /// The flags this mask should clear that are still set in `vector`.
    pub fn still_set(&self, vector: &CapVector) -> Vec<&'static str> {
        self.flags.iter().copied().filter(|f| vector.has(f)).collect()
    }
}

/// A capability vector as a library uses it: the two 64-bit words of OPENSSL_ia32cap(3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapVector(pub [u64; 2]);

impl CapVector {
    /// From a library's `OPENSSL_ia32cap_P[4]` (32-bit words: EDX, ECX, EBX.7, ECX.7).
    pub fn from_u32s(p: [u32; 4]) -> CapVector {
        CapVector([
            u64::from(p[0]) | u64::from(p[1]) << 32,
            u64::from(p[2]) | u64::from(p[3]) << 32,
        ])
    }

    /// Parse OpenSSL's own rendering, `OPENSSL_ia32cap=0x<word0>:0x<word1>` (what
    /// `OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS)` and `openssl info -cpusettings` print, optionally
    /// followed by ` env:<variable>`); a leading `CPUINFO: ` is accepted too. OpenSSL 3.6 prints
    /// five words (`0x<w0>:0x<w1>:0x<w2>:0x<w3>:0x<w4>`, zero-padded): words 0 and 1 have the
    /// layout above and are the vector; the others must parse but are not kept.
    pub fn parse_openssl_info(text: &str) -> Option<CapVector> {
        let text = text.trim().strip_prefix("CPUINFO: ").unwrap_or(text.trim());
        let rest = text.strip_prefix("OPENSSL_ia32cap=")?;
        let vector = rest.split_whitespace().next()?;
        let hex = |w: &str| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok();
        let words: Option<Vec<u64>> = vector.split(':').map(hex).collect();
        match words?.as_slice() {
            [w0, w1, ..] => Some(CapVector([*w0, *w1])),
            _ => None,
        }
    }

    /// Whether flag `name` (one of [`CAP_FLAGS`]) is set.
    pub fn has(&self, name: &str) -> bool {
        CAP_FLAGS
            .iter()
            .find(|f| f.name == name)
            .is_some_and(|f| self.0[f.word] >> f.bit & 1 == 1)
    }

    /// `0x<word0>:0x<word1>`, as OpenSSL prints it.
    pub fn to_hex(&self) -> String {
        format!("{:#x}:{:#x}", self.0[0], self.0[1])
    }

    /// Every [`CAP_FLAGS`] name with whether it is set, in table order.
    pub fn flags(&self) -> serde_json::Map<String, serde_json::Value> {
        CAP_FLAGS.iter().map(|f| (f.name.to_string(), self.has(f.name).into())).collect()
    }
}

/// What a backend can say about its capability vector.
#[derive(Clone, Debug)]
pub enum Capabilities {
    /// The vector the library chose its code paths from, read in this process, and how.
    Vector { vector: CapVector, source: &'static str },
    /// The library reads no capability mask; the string says so for a person.
    NotMaskable(String),
    /// The library has a mask, but its vector could not be read (the string says why).
    Unreadable(String),
}

impl Capabilities {
    /// The `capabilities` object of `hello` and `result` (docs/worker-protocol.md).
    pub fn to_json(&self) -> serde_json::Value {
        let env = std::env::var(MASK_ENV).ok();
        let cpuid = CapVector::from_cpuid().map(|v| v.to_hex());
        let mut value = match self {
            Capabilities::Vector { vector, source } => serde_json::json!({
                "maskable": true,
                "source": source,
                "openssl_ia32cap": vector.to_hex(),
                "words": [format!("{:#x}", vector.0[0]), format!("{:#x}", vector.0[1])],
                "flags": vector.flags(),
                "env": env,
            }),
            Capabilities::NotMaskable(reason) => serde_json::json!({
                "maskable": false, "reason": reason, "env": env,
            }),
            Capabilities::Unreadable(reason) => serde_json::json!({
                "maskable": true, "reason": reason, "env": env,
            }),
        };
        value["cpuid"] = cpuid.into();
        value
    }
}

impl CapVector {
    /// The vector straight from CPUID (leaf 1 EDX:ECX, leaf 7.0 EBX:ECX), before any library
    /// adjusts it; `None` off x86-64.
    pub fn from_cpuid() -> Option<CapVector> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__cpuid, __cpuid_count};
            // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is read only when leaf 0 says it
            // exists. (Newer Rust declares these intrinsics safe, hence the allow.)
            #[allow(unused_unsafe)]
            let (max, l1) = unsafe { (__cpuid(0).eax, __cpuid(1)) };
            let (ebx7, ecx7) = if max >= 7 {
                #[allow(unused_unsafe)]
                let l7 = unsafe { __cpuid_count(7, 0) };
                (l7.ebx, l7.ecx)
            } else {
                (0, 0)
            };
            Some(CapVector::from_u32s([l1.edx, l1.ecx, ebx7, ecx7]))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }
}

/// Why a case cannot run with the mask it asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum MaskProblem {
    /// The library has no runtime mask (ring, RustCrypto): reported as `unsupported`.
    NotMaskable(String),
    /// The mask did not take effect, or could not be verified: reported as `invalid`.
    NotApplied(String),
}

/// Check that `mask` is in effect for `library`, whose capability state is `caps`, in a
/// process whose `OPENSSL_ia32cap` is `env`. Never trusts the variable alone: a non-baseline
/// mask passes only if every bit it clears is clear in the vector the library itself reports.
pub fn check_mask(
    mask: &CpuMask,
    library: &str,
    caps: &Capabilities,
    env: Option<&str>,
) -> Result<(), MaskProblem> {
    let expected = mask.env_value();
    let env_text = |e: Option<&str>| e.map_or("unset".to_string(), |v| format!("'{v}'"));
    let applied = |why: String| Err(MaskProblem::NotApplied(format!("capability mask not applied: {why}")));
    if expected.is_none() {
        // baseline: no mask may be in force for a library that reads one.
        return match (caps, env) {
            (Capabilities::NotMaskable(_), _) | (_, None) => Ok(()),
            (_, Some(v)) => applied(format!(
                "baseline asks for no mask, but {MASK_ENV}='{v}' is set in the worker's environment"
            )),
        };
    }
    let expected = expected.unwrap();
    let vector = match caps {
        Capabilities::NotMaskable(reason) => return Err(MaskProblem::NotMaskable(reason.clone())),
        Capabilities::Unreadable(reason) => {
            return applied(format!("cannot read the capability vector {library} uses ({reason}), so {} cannot be verified", mask.name))
        }
        Capabilities::Vector { vector, .. } => vector,
    };
    let still = mask.still_set(vector);
    if !still.is_empty() {
        let why = if env == Some(expected.as_str()) {
            format!("{library} ignored {MASK_ENV}='{expected}': it still uses {}", still.join(", "))
        } else {
            format!(
                "{library} still uses {} ({MASK_ENV} in the worker's environment: {}; {} needs '{expected}' there when the worker starts)",
                still.join(", "),
                env_text(env),
                mask.name
            )
        };
        return applied(why);
    }
    if env != Some(expected.as_str()) {
        return applied(format!(
            "{MASK_ENV} in the worker's environment is {}, not '{expected}' as {} sets it",
            env_text(env),
            mask.name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const AES: u64 = 1 << 57;
    const PCLMUL: u64 = 1 << 33;

    #[test]
    fn mask_bits_match_the_openssl_man_page() {
        // OPENSSL_ia32cap(3): AES-NI #57, PCLMULQDQ #33; #64+5 AVX2, #64+29 SHA, #64+16
        // AVX512F, #64+41 VAES, #64+42 VPCLMULQDQ.
        let m = |n| CpuMask::by_name(n).unwrap();
        assert_eq!(m("no-aesni").clears, [AES | PCLMUL, 1 << 41 | 1 << 42]);
        assert_eq!(m("no-shani").clears, [0, 1 << 29]);
        assert_eq!(m("no-avx2").clears[0], 0);
        assert_eq!(m("no-avx2").clears[1] & (1 << 5 | 1 << 16), 1 << 5 | 1 << 16);
        assert_eq!(m("no-avx512").clears, [0, 1 << 16 | 1 << 17 | 1 << 21 | 1 << 30 | 1 << 31]);
        assert_eq!(m("baseline").clears, [0, 0]);
    }

    #[test]
    fn env_values_spell_every_word() {
        let env = |n| CpuMask::by_name(n).unwrap().env_value();
        assert_eq!(env("baseline"), None);
        assert_eq!(env("no-aesni").as_deref(), Some("~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0"));
        assert_eq!(env("no-shani").as_deref(), Some("~0x0:~0x20000000:~0x0:~0x0:~0x0"));
        assert_eq!(env("no-avx512").as_deref(), Some("~0x0:~0xc0230000:~0x0:~0x0:~0x0"));
        assert!(CpuMask::by_name("no-aes").is_none());
        let names: Vec<_> = CPU_MASKS.iter().map(|m| m.name).collect();
        assert_eq!(names, ["baseline", "no-aesni", "no-shani", "no-avx2", "no-avx512"]);
    }

    #[test]
    fn parses_openssl_info_and_decodes_flags() {
        // What OpenSSL 3.0.19 printed on the AMD EPYC this was written on, unmasked and masked.
        let full = CapVector::parse_openssl_info("OPENSSL_ia32cap=0xfffa3203078bffff:0x400684219c07ab").unwrap();
        assert_eq!(full.0, [0xfffa3203078bffff, 0x400684219c07ab]);
        for f in ["aes", "pclmulqdq", "avx", "avx2", "sha", "bmi2", "adx", "vaes", "vpclmulqdq", "ssse3"] {
            assert!(full.has(f), "{f}");
        }
        assert!(!full.has("avx512f"));
        let masked = CapVector::parse_openssl_info(
            "CPUINFO: OPENSSL_ia32cap=0xfdfa3201078bffff:0x400084219c07ab env:~0x200000200000000:~0x60000000000",
        )
        .unwrap();
        assert!(!masked.has("aes") && !masked.has("pclmulqdq") && !masked.has("vaes") && !masked.has("vpclmulqdq"));
        assert!(masked.has("sha") && masked.has("avx2"));
        assert_eq!(masked.to_hex(), "0xfdfa3201078bffff:0x400084219c07ab");
        assert_eq!(masked.flags()["aes"], false);
        assert_eq!(masked.flags()["sha"], true);
        // OpenSSL 3.6: five zero-padded words; the first two are the vector.
        let five = CapVector::parse_openssl_info(
            "OPENSSL_ia32cap=0xfffa3203078bffff:0x0000000000400684219c07ab:0x0000000000000010:0x0000000000000000:0x0000000000000000",
        )
        .unwrap();
        assert_eq!(five, full);
        for bad in [
            "",
            "OPENSSL_ia32cap=0x12",
            "OPENSSL_ia32cap=12:34",
            "CPUINFO: N/A",
            "OPENSSL_ia32cap=0xzz:0x1",
            "OPENSSL_ia32cap=0x1:0x2:zz",
        ] {
            assert_eq!(CapVector::parse_openssl_info(bad), None, "{bad}");
        }
    }

    #[test]
    fn from_u32s_places_the_words() {
        let v = CapVector::from_u32s([0x0000_0001, 0x0200_0002, 0x2000_0020, 0x0000_0600]);
        assert_eq!(v.0, [0x0200_0002_0000_0001, 0x0000_0600_2000_0020]);
        assert!(v.has("aes") && v.has("pclmulqdq") && v.has("sha") && v.has("avx2") && v.has("vaes"));
    }

    fn vector(words: [u64; 2]) -> Capabilities {
        Capabilities::Vector { vector: CapVector(words), source: "test" }
    }

    #[test]
    fn check_mask_accepts_only_a_mask_the_library_applied() {
        let no_aesni = CpuMask::by_name("no-aesni").unwrap();
        let baseline = CpuMask::by_name("baseline").unwrap();
        let env = no_aesni.env_value().unwrap();
        let all = [u64::MAX, u64::MAX];
        let cleared = [!(AES | PCLMUL), !(1u64 << 41 | 1 << 42)];
        // applied: variable set and bits clear
        assert_eq!(check_mask(no_aesni, "OpenSSL", &vector(cleared), Some(&env)), Ok(()));
        // ignored: variable set, bits still there
        let Err(MaskProblem::NotApplied(why)) = check_mask(no_aesni, "OpenSSL", &vector(all), Some(&env)) else {
            panic!()
        };
        assert!(why.starts_with("capability mask not applied: OpenSSL ignored OPENSSL_ia32cap="), "{why}");
        assert!(why.contains("aes, pclmulqdq, vaes, vpclmulqdq"), "{why}");
        // never reached the library
        let Err(MaskProblem::NotApplied(why)) = check_mask(no_aesni, "AWS-LC", &vector(all), None) else { panic!() };
        assert!(why.contains("AWS-LC still uses aes") && why.contains("unset"), "{why}");
        // bits clear but not by our variable (e.g. a CPU without AES-NI and a stray value)
        assert!(matches!(check_mask(no_aesni, "OpenSSL", &vector(cleared), Some("~0x0")), Err(MaskProblem::NotApplied(_))));
        // baseline: no variable allowed for a maskable library; anything goes for ring
        assert_eq!(check_mask(baseline, "OpenSSL", &vector(all), None), Ok(()));
        assert!(matches!(check_mask(baseline, "OpenSSL", &vector(all), Some("~0x0")), Err(MaskProblem::NotApplied(_))));
        let ring = Capabilities::NotMaskable("ring has no runtime CPU capability mask".into());
        assert_eq!(check_mask(baseline, "ring", &ring, Some("~0x0")), Ok(()));
        assert_eq!(
            check_mask(no_aesni, "ring", &ring, Some(&env)),
            Err(MaskProblem::NotMaskable("ring has no runtime CPU capability mask".into()))
        );
        let unreadable = Capabilities::Unreadable("no symbol".into());
        assert!(matches!(check_mask(no_aesni, "X", &unreadable, Some(&env)), Err(MaskProblem::NotApplied(_))));
    }

    #[test]
    fn cpuid_vector_agrees_with_proc_cpuinfo() {
        let Some(hw) = CapVector::from_cpuid() else { return };
        let info = CpuInfo::read();
        for (ours, linux) in [("aes", "aes"), ("pclmulqdq", "pclmulqdq"), ("avx2", "avx2"), ("sha", "sha_ni"), ("vaes", "vaes")] {
            assert_eq!(hw.has(ours), info.flags.contains(&linux), "{ours}");
        }
    }
}
