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
// ZERO. So a mask spells all five words, the last three clearing nothing: the same bits are
// cleared in every library. OpenSSL 3.0 and AWS-LC read the first two parts and stop.
//
// Every value has the same length, `baseline`'s included: each word is spelt `~0x` and 16 hex
// digits, and `baseline` sets the variable to five words that clear nothing. The orchestrator
// thus starts every configuration's worker with an environment of the same size (the stack
// starts where the environment ends, and its alignment moves measured times), and never with
// the variable unset against one set. Leading zeros parse as zeros in all three parsers:
// OpenSSL's `ossl_strtouint64` (3.0 and 3.6: "0x" then hex digits until a non-digit) and
// AWS-LC's `sscanf("%" PRIx64)`; each library reports, under baseline's value, the vector it
// reports without the variable (docs/methodology.md, "CPU capability masks", has the runs).
// An EMPTY variable is not "unset": OpenSSL 3.0 then replaces the vector with 0 (every
// capability off) and AWS-LC with an unparsed value, so baseline's value must be exact.

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
/// `no-bignum`: OPENSSL_ia32cap(3) #64+8 BMI2, #64+19 ADX, #64+21 AVX512IFMA.
const BIGNUM: &[&str] = &["bmi2", "adx", "avx512ifma"];

/// Every mask a study may name. `baseline` clears nothing: its variable's value leaves every
/// bit as the CPU reports it (see [`CpuMask::env_value`]).
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
    CpuMask {
        name: "no-bignum",
        flags: BIGNUM,
        clears: bits(BIGNUM),
        description: "the big-number extensions RSA and DH use: BMI2 and ADX (MULX/ADCX/ADOX \
                      Montgomery multiplication) and AVX-512 IFMA (52-bit-limb RSA \
                      exponentiation); the x86 analogue of taking the crypto accelerator away \
                      from RSA and DH. Other code gated on them (P-256, X25519, SHA-2's AVX2 \
                      path) loses them too",
    },
];

/// The environment variable OpenSSL and AWS-LC read their capability mask from.
pub const MASK_ENV: &str = "OPENSSL_ia32cap";

/// Words a mask's `OPENSSL_ia32cap` value spells: as many as the newest OpenSSL a worker may be
/// built with reads (five in OpenSSL 3.6: `OPENSSL_IA32CAP_P_MAX_INDEXES` / 2).
pub const ENV_WORDS: usize = 5;

/// Hex digits of every word in a mask's value (a 64-bit word's worth), so every mask's value
/// has the same length: `ENV_WORDS` × `~0x` + 16 digits, joined by `:` (99 bytes).
pub const ENV_WORD_DIGITS: usize = 16;

impl CpuMask {
    /// The mask called `name`, or `None`: one of [`CPU_MASKS`], or several of them but
    /// `baseline` joined by `+` (`no-aesni+no-bignum`: every bit either clears, to measure
    /// whether two extension groups' costs add up). A combination is made once per process
    /// and kept for its life (a worker serves a few requests; the table of those made is
    /// bounded by the names it is asked for).
    pub fn by_name(name: &str) -> Option<&'static CpuMask> {
        if let Some(m) = CPU_MASKS.iter().find(|m| m.name == name) {
            return Some(m);
        }
        let parts: Vec<&'static CpuMask> = name
            .split('+')
            .map(|p| CPU_MASKS.iter().find(|m| m.name == p && !m.is_baseline()))
            .collect::<Option<_>>()?;
        let distinct: std::collections::HashSet<_> = parts.iter().map(|m| m.name).collect();
        if parts.len() < 2 || distinct.len() != parts.len() {
            return None;
        }
        static MADE: std::sync::OnceLock<std::sync::Mutex<Vec<&'static CpuMask>>> = std::sync::OnceLock::new();
        let mut made = MADE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = made.iter().find(|m| m.name == name) {
            return Some(*m);
        }
        let mut flags: Vec<&'static str> = Vec::new();
        for f in parts.iter().flat_map(|m| m.flags.iter().copied()) {
            if !flags.contains(&f) {
                flags.push(f);
            }
        }
        let clears = parts.iter().fold([0u64; 2], |acc, m| [acc[0] | m.clears[0], acc[1] | m.clears[1]]);
        let mask: &'static CpuMask = Box::leak(Box::new(CpuMask {
            name: Box::leak(name.to_string().into_boxed_str()),
            flags: Box::leak(flags.into_boxed_slice()),
            clears,
            description: "several masks at once",
        }));
        made.push(mask);
        Some(mask)
    }

    /// Whether this mask clears nothing (`baseline`).
    pub fn is_baseline(&self) -> bool {
        self.clears == [0, 0]
    }

    /// The value of `OPENSSL_ia32cap` that applies this mask, `baseline`'s included (a value
    /// that clears nothing). All [`ENV_WORDS`] words are always given, those past the second
    /// clearing nothing (see the comment above: OpenSSL 3.0 zeroes word 1, OpenSSL 3.6 words
    /// 2-4, when not given), each as `~0x` and [`ENV_WORD_DIGITS`] hex digits, so that every
    /// mask's value has the same length.
    pub fn env_value(&self) -> String {
        let mut words = [0u64; ENV_WORDS];
        words[..2].copy_from_slice(&self.clears);
        let words: Vec<String> = words.iter().map(|w| format!("~0x{w:0ENV_WORD_DIGITS$x}")).collect();
        words.join(":")
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

    /// Parse `0x<word0>:0x<word1>` ([`CapVector::to_hex`]'s rendering, as `capabilities.
    /// openssl_ia32cap` reports it): exactly two words of 1 to 16 hex digits each.
    pub fn parse_hex(text: &str) -> Option<CapVector> {
        let word = |w: &str| {
            let digits = w.strip_prefix("0x")?;
            let ok = (1..=16).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_hexdigit());
            ok.then(|| u64::from_str_radix(digits, 16).ok()).flatten()
        };
        let (w0, w1) = text.split_once(':')?;
        Some(CapVector([word(w0)?, word(w1)?]))
    }

    /// This vector with the bits of `clears` cleared.
    pub fn without(&self, clears: [u64; 2]) -> CapVector {
        CapVector([self.0[0] & !clears[0], self.0[1] & !clears[1]])
    }

    /// The [`CAP_FLAGS`] set in one of `self` and `other` but not both.
    pub fn differing_flags(&self, other: &CapVector) -> Vec<&'static str> {
        CAP_FLAGS.iter().filter(|f| self.has(f.name) != other.has(f.name)).map(|f| f.name).collect()
    }

    /// Whether flag `name` (one of [`CAP_FLAGS`]) is set.
    pub fn has(&self, name: &str) -> bool {
        CAP_FLAGS
            .iter()
            .find(|f| f.name == name)
            .is_some_and(|f| self.0[f.word] >> f.bit & 1 == 1)
    }

    /// `0x<word0>:0x<word1>`, as OpenSSL prints it.
    pub fn to_hex(self) -> String {
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
/// The variable must hold exactly the mask's value, `baseline`'s included (unset or empty is
/// not baseline: an empty value clears every capability in OpenSSL). With `unmasked`, the
/// vector the library reported in a process started without the variable (the run request's
/// `cpu_vector_unmasked`), the library's vector here must be exactly that vector less the bits
/// the mask clears: for `baseline`, the very same vector. (Neither OpenSSL, 3.0 or 3.6, nor
/// AWS-LC derives other bits from the ones our masks clear: each clears the bits it is given,
/// after its own CPUID adjustments; docs/methodology.md, "CPU capability masks".)
/// A library without a mask (ring, RustCrypto) passes `baseline` whatever the variable.
pub fn check_mask(
    mask: &CpuMask,
    library: &str,
    caps: &Capabilities,
    env: Option<&str>,
    unmasked: Option<&CapVector>,
) -> Result<(), MaskProblem> {
    let expected = mask.env_value();
    let env_text = |e: Option<&str>| match e {
        None => "unset".to_string(),
        Some("") => "'' (empty: OpenSSL then clears every capability)".to_string(),
        Some(v) => format!("'{v}'"),
    };
    let applied = |why: String| Err(MaskProblem::NotApplied(format!("capability mask not applied: {why}")));
    let env_ok = env == Some(expected.as_str());
    let env_wrong = || {
        applied(format!(
            "{MASK_ENV} in the worker's environment is {}, not '{expected}' as {} sets it",
            env_text(env),
            mask.name
        ))
    };
    let vector = match caps {
        Capabilities::NotMaskable(_) if mask.is_baseline() => return Ok(()),
        Capabilities::NotMaskable(reason) => return Err(MaskProblem::NotMaskable(reason.clone())),
        Capabilities::Unreadable(_) if mask.is_baseline() && unmasked.is_none() => {
            return if env_ok { Ok(()) } else { env_wrong() };
        }
        Capabilities::Unreadable(reason) => {
            return applied(format!("cannot read the capability vector {library} uses ({reason}), so {} cannot be verified", mask.name))
        }
        Capabilities::Vector { vector, .. } => vector,
    };
    let still = mask.still_set(vector);
    if !still.is_empty() {
        let why = if env_ok {
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
    if !env_ok {
        return env_wrong();
    }
    if let Some(unmasked) = unmasked {
        let want = unmasked.without(mask.clears);
        if *vector != want {
            let whence = if mask.is_baseline() {
                format!("the vector it uses without {MASK_ENV} (cpu_vector_unmasked)")
            } else {
                format!(
                    "the vector it uses without {MASK_ENV} (cpu_vector_unmasked {}) less {}'s bits",
                    unmasked.to_hex(),
                    mask.name
                )
            };
            let xor = CapVector([vector.0[0] ^ want.0[0], vector.0[1] ^ want.0[1]]);
            let flags = vector.differing_flags(&want);
            let named = if flags.is_empty() { String::new() } else { format!(": {}", flags.join(", ")) };
            return applied(format!(
                "{library} uses {} under {}, not {}, {whence}; they differ in bits {}{named}",
                vector.to_hex(),
                mask.name,
                want.to_hex(),
                xor.to_hex()
            ));
        }
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
        // #64+8 BMI2, #64+19 ADX, #64+21 AVX512IFMA, and nothing else (BMI1 #64+3 stays).
        assert_eq!(m("no-bignum").clears, [0, 1 << 8 | 1 << 19 | 1 << 21]);
        assert_eq!(m("no-bignum").clears[1] & 1 << 3, 0);
    }

    #[test]
    fn masks_joined_by_plus_clear_every_bit_either_clears() {
        let both = CpuMask::by_name("no-aesni+no-bignum").unwrap();
        assert_eq!(both.clears, [AES | PCLMUL, 1 << 41 | 1 << 42 | 1 << 8 | 1 << 19 | 1 << 21]);
        assert_eq!(both.flags, ["aes", "pclmulqdq", "vaes", "vpclmulqdq", "bmi2", "adx", "avx512ifma"]);
        assert_eq!(both.env_value().len(), CpuMask::by_name("baseline").unwrap().env_value().len());
        // made once: the same mask again
        assert!(std::ptr::eq(both, CpuMask::by_name("no-aesni+no-bignum").unwrap()));
        // an overlap's flag is cleared once
        assert_eq!(CpuMask::by_name("no-avx2+no-bignum").unwrap().flags.iter().filter(|f| **f == "avx512ifma").count(), 1);
        for bad in ["no-aesni+", "baseline+no-aesni", "no-aesni+no-aesni", "no-aesni+nope", "+"] {
            assert!(CpuMask::by_name(bad).is_none(), "{bad}");
        }
    }

    const ZERO: &str = "~0x0000000000000000";

    #[test]
    fn env_values_spell_every_word() {
        let env = |n| CpuMask::by_name(n).unwrap().env_value();
        let zeros3 = [ZERO; 3].join(":");
        assert_eq!(env("baseline"), [ZERO; 5].join(":"));
        assert_eq!(env("no-aesni"), format!("~0x0200000200000000:~0x0000060000000000:{zeros3}"));
        assert_eq!(env("no-shani"), format!("{ZERO}:~0x0000000020000000:{zeros3}"));
        assert_eq!(env("no-avx2"), format!("{ZERO}:~0x00000000c0230020:{zeros3}"));
        assert_eq!(env("no-avx512"), format!("{ZERO}:~0x00000000c0230000:{zeros3}"));
        assert_eq!(env("no-bignum"), format!("{ZERO}:~0x0000000000280100:{zeros3}"));
        // One length for every mask, baseline's included: the environment's size is the same
        // for every configuration's worker.
        for m in CPU_MASKS {
            assert_eq!(m.env_value().len(), ENV_WORDS * (3 + ENV_WORD_DIGITS) + ENV_WORDS - 1, "{}", m.name);
        }
        assert!(CpuMask::by_name("no-aes").is_none());
        let names: Vec<_> = CPU_MASKS.iter().map(|m| m.name).collect();
        assert_eq!(names, ["baseline", "no-aesni", "no-shani", "no-avx2", "no-avx512", "no-bignum"]);
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
        let env = no_aesni.env_value();
        let base_env = baseline.env_value();
        let all = [u64::MAX, u64::MAX];
        let cleared = [!(AES | PCLMUL), !(1u64 << 41 | 1 << 42)];
        // applied: variable set and bits clear
        assert_eq!(check_mask(no_aesni, "OpenSSL", &vector(cleared), Some(&env), None), Ok(()));
        // ignored: variable set, bits still there
        let Err(MaskProblem::NotApplied(why)) = check_mask(no_aesni, "OpenSSL", &vector(all), Some(&env), None) else {
            panic!()
        };
        assert!(why.starts_with("capability mask not applied: OpenSSL ignored OPENSSL_ia32cap="), "{why}");
        assert!(why.contains("aes, pclmulqdq, vaes, vpclmulqdq"), "{why}");
        // never reached the library
        let Err(MaskProblem::NotApplied(why)) = check_mask(no_aesni, "AWS-LC", &vector(all), None, None) else { panic!() };
        assert!(why.contains("AWS-LC still uses aes") && why.contains("unset"), "{why}");
        // bits clear but not by our variable (e.g. a CPU without AES-NI and a stray value),
        // nor by its natural-width spelling
        assert!(matches!(check_mask(no_aesni, "OpenSSL", &vector(cleared), Some("~0x0"), None), Err(MaskProblem::NotApplied(_))));
        let natural = "~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0";
        assert!(matches!(check_mask(no_aesni, "OpenSSL", &vector(cleared), Some(natural), None), Err(MaskProblem::NotApplied(_))));
        // baseline: exactly its own value for a maskable library; anything goes for ring
        assert_eq!(check_mask(baseline, "OpenSSL", &vector(all), Some(&base_env), None), Ok(()));
        assert!(matches!(check_mask(baseline, "OpenSSL", &vector(all), Some("~0x0"), None), Err(MaskProblem::NotApplied(_))));
        assert!(matches!(check_mask(baseline, "OpenSSL", &vector(all), Some(&env), None), Err(MaskProblem::NotApplied(_))));
        let ring = Capabilities::NotMaskable("ring has no runtime CPU capability mask".into());
        assert_eq!(check_mask(baseline, "ring", &ring, Some("~0x0"), None), Ok(()));
        assert_eq!(check_mask(baseline, "ring", &ring, None, None), Ok(()));
        assert_eq!(
            check_mask(no_aesni, "ring", &ring, Some(&env), None),
            Err(MaskProblem::NotMaskable("ring has no runtime CPU capability mask".into()))
        );
        let unreadable = Capabilities::Unreadable("no symbol".into());
        assert!(matches!(check_mask(no_aesni, "X", &unreadable, Some(&env), None), Err(MaskProblem::NotApplied(_))));
        assert_eq!(check_mask(baseline, "X", &unreadable, Some(&base_env), None), Ok(()));
        let unmasked = CapVector(all);
        assert!(matches!(
            check_mask(baseline, "X", &unreadable, Some(&base_env), Some(&unmasked)),
            Err(MaskProblem::NotApplied(_))
        ));
    }

    fn not_applied(r: Result<(), MaskProblem>) -> String {
        match r {
            Err(MaskProblem::NotApplied(why)) => {
                assert!(why.starts_with("capability mask not applied: "), "{why}");
                why
            }
            other => panic!("expected NotApplied, got {other:?}"),
        }
    }

    // The vector OpenSSL 3.0.19 reported on this AMD EPYC without OPENSSL_ia32cap.
    const UNMASKED: [u64; 2] = [0xfffa3203078bffff, 0x405fc6f1bf07ab];

    #[test]
    fn baseline_without_its_value_is_not_applied() {
        let baseline = CpuMask::by_name("baseline").unwrap();
        let why = not_applied(check_mask(baseline, "OpenSSL", &vector(UNMASKED), None, None));
        assert!(why.contains("is unset, not '~0x0000000000000000:"), "{why}");
        // An empty variable is not an unset one: OpenSSL then clears every capability.
        let why = not_applied(check_mask(baseline, "OpenSSL", &vector([0x400, 0]), Some(""), None));
        assert!(why.contains("is '' (empty: OpenSSL then clears every capability)"), "{why}");
        // Also refused when the vector happens to be right.
        let unmasked = CapVector(UNMASKED);
        not_applied(check_mask(baseline, "OpenSSL", &vector(UNMASKED), Some(""), Some(&unmasked)));
        not_applied(check_mask(baseline, "OpenSSL", &vector(UNMASKED), None, Some(&unmasked)));
    }

    #[test]
    fn baseline_must_use_the_unmasked_vector() {
        let baseline = CpuMask::by_name("baseline").unwrap();
        let env = baseline.env_value();
        let unmasked = CapVector(UNMASKED);
        // right value, same vector: applied
        assert_eq!(check_mask(baseline, "OpenSSL", &vector(UNMASKED), Some(&env), Some(&unmasked)), Ok(()));
        // right value, but the library's vector differs from the one it has without the
        // variable (here: SHA extensions gone)
        let lost_sha = [UNMASKED[0], UNMASKED[1] & !(1 << 29)];
        let why = not_applied(check_mask(baseline, "AWS-LC", &vector(lost_sha), Some(&env), Some(&unmasked)));
        assert_eq!(
            why,
            "capability mask not applied: AWS-LC uses 0xfffa3203078bffff:0x405fc6d1bf07ab under \
             baseline, not 0xfffa3203078bffff:0x405fc6f1bf07ab, the vector it uses without \
             OPENSSL_ia32cap (cpu_vector_unmasked); they differ in bits 0x0:0x20000000: sha"
        );
        // A difference outside the decoded flags is named by its bits.
        let odd = [UNMASKED[0] ^ 1 << 20, UNMASKED[1]];
        let why = not_applied(check_mask(baseline, "OpenSSL", &vector(odd), Some(&env), Some(&unmasked)));
        assert!(why.ends_with("they differ in bits 0x100000:0x0"), "{why}");
    }

    #[test]
    fn other_masks_must_clear_exactly_their_bits() {
        let unmasked = CapVector(UNMASKED);
        for mask in CPU_MASKS.iter().filter(|m| !m.is_baseline()) {
            let env = mask.env_value();
            let want = unmasked.without(mask.clears);
            assert_eq!(check_mask(mask, "OpenSSL", &vector(want.0), Some(&env), Some(&unmasked)), Ok(()), "{}", mask.name);
            // One more bit gone than the mask clears (BMI1 is in none of them): not applied.
            let more = [want.0[0], want.0[1] & !(1 << 3)];
            let why = not_applied(check_mask(mask, "OpenSSL", &vector(more), Some(&env), Some(&unmasked)));
            assert!(why.contains(&format!("less {}'s bits", mask.name)) && why.ends_with(": bmi1"), "{why}");
        }
        // The vectors OpenSSL 3.0.19 and AWS-LC reported here under no-aesni and no-avx2.
        let m = |n| CpuMask::by_name(n).unwrap();
        let check = |name, vec: [u64; 2]| check_mask(m(name), "OpenSSL", &vector(vec), Some(&m(name).env_value()), Some(&unmasked));
        assert_eq!(check("no-aesni", [0xfdfa3201078bffff, 0x4059c6f1bf07ab]), Ok(()));
        assert_eq!(check("no-avx2", [0xfffa3203078bffff, 0x405fc6319c078b]), Ok(()));
        // and what both reported under no-bignum (release worker, 2026-11-23): 0x280100 less.
        assert_eq!(check("no-bignum", [0xfffa3203078bffff, 0x405fc6f19706ab]), Ok(()));
    }

    #[test]
    fn parses_a_two_word_vector() {
        assert_eq!(CapVector::parse_hex("0xfffa3203078bffff:0x405fc6f1bf07ab"), Some(CapVector(UNMASKED)));
        assert_eq!(CapVector::parse_hex("0x0:0x0"), Some(CapVector([0, 0])));
        assert_eq!(CapVector::parse_hex("0x0000000000000001:0xABC"), Some(CapVector([1, 0xabc])));
        let v = CapVector(UNMASKED);
        assert_eq!(CapVector::parse_hex(&v.to_hex()), Some(v));
        for bad in [
            "",
            "0x1",
            "0x1:0x2:0x3",
            "1:2",
            "0x:0x1",
            "0x1:0x",
            "0x1 :0x2",
            "0x+1:0x2",
            "0x1:0xg",
            "0x00000000000000001:0x1",
            "OPENSSL_ia32cap=0x1:0x2",
        ] {
            assert_eq!(CapVector::parse_hex(bad), None, "{bad}");
        }
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
