//! The operation catalogue: canonical names from the field (`rsa2048-sign`, `aes-128-gcm-seal`,
//! `sha256`, `x25519-derive`, `ml-kem-768-encaps`, `ml-dsa-65-sign`, `x25519mlkem768-encaps`),
//! their parameters, and the fixed keys.
//!
//! A request names an operation (`Op::parse`) and parameters (`Params::resolve`); the result is a
//! [`Case`]: everything a backend needs to build the timed closure. Parameters that do not apply
//! to an operation are refused, so a typo in a study file is an error, not a silent default.

pub mod keys;
pub mod prepare;

use serde::Serialize;
use std::fmt;

/// Hash functions (FIPS 180-4, FIPS 202).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum DigestAlg {
    #[serde(rename = "sha1")]
    Sha1,
    #[serde(rename = "sha256")]
    Sha256,
    #[serde(rename = "sha384")]
    Sha384,
    #[serde(rename = "sha512")]
    Sha512,
    #[serde(rename = "sha3-256")]
    Sha3_256,
}

impl DigestAlg {
    pub const ALL: [DigestAlg; 5] = [
        DigestAlg::Sha1,
        DigestAlg::Sha256,
        DigestAlg::Sha384,
        DigestAlg::Sha512,
        DigestAlg::Sha3_256,
    ];

    /// Canonical lower-case name (`sha256`, `sha3-256`).
    pub fn name(self) -> &'static str {
        match self {
            DigestAlg::Sha1 => "sha1",
            DigestAlg::Sha256 => "sha256",
            DigestAlg::Sha384 => "sha384",
            DigestAlg::Sha512 => "sha512",
            DigestAlg::Sha3_256 => "sha3-256",
        }
    }

    pub fn from_name(name: &str) -> Option<DigestAlg> {
        DigestAlg::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Output length in bytes.
    pub fn output_len(self) -> usize {
        match self {
            DigestAlg::Sha1 => 20,
            DigestAlg::Sha256 | DigestAlg::Sha3_256 => 32,
            DigestAlg::Sha384 => 48,
            DigestAlg::Sha512 => 64,
        }
    }
}

/// Authenticated ciphers: 12-byte nonce, 16-byte tag appended to the ciphertext.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AeadAlg {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl AeadAlg {
    pub fn name(self) -> &'static str {
        match self {
            AeadAlg::Aes128Gcm => "aes-128-gcm",
            AeadAlg::Aes256Gcm => "aes-256-gcm",
            AeadAlg::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            AeadAlg::Aes128Gcm => 16,
            AeadAlg::Aes256Gcm | AeadAlg::ChaCha20Poly1305 => 32,
        }
    }

    pub const NONCE_LEN: usize = 12;
    pub const TAG_LEN: usize = 16;
}

/// XTS-AES key size: AES-128 (a 32-byte XTS key: two AES-128 keys) or AES-256 (64 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XtsBits {
    Aes128,
    Aes256,
}

impl XtsBits {
    #[cfg(test)]
    pub const ALL: [XtsBits; 2] = [XtsBits::Aes128, XtsBits::Aes256];

    /// Bytes of the XTS key: Key1 ‖ Key2, two AES keys (32 or 64).
    pub fn key_len(self) -> usize {
        match self {
            XtsBits::Aes128 => 32,
            XtsBits::Aes256 => 64,
        }
    }

    /// `AES-128-XTS` or `AES-256-XTS`.
    pub fn name(self) -> &'static str {
        match self {
            XtsBits::Aes128 => "AES-128-XTS",
            XtsBits::Aes256 => "AES-256-XTS",
        }
    }
}

/// RSA signature padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RsaPadding {
    /// RSASSA-PKCS1-v1_5 (RFC 8017 §8.2).
    Pkcs1,
    /// RSASSA-PSS (RFC 8017 §8.1), MGF1 with the same digest, salt length = digest length.
    Pss,
}

impl RsaPadding {
    pub const ALL: [RsaPadding; 2] = [RsaPadding::Pkcs1, RsaPadding::Pss];

    /// `pkcs1`, `pss` (as requests spell it and results report it).
    pub fn name(self) -> &'static str {
        match self {
            RsaPadding::Pkcs1 => "pkcs1",
            RsaPadding::Pss => "pss",
        }
    }

    pub fn from_name(name: &str) -> Option<RsaPadding> {
        RsaPadding::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// ML-DSA parameter sets (FIPS 204 Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MlDsaLevel {
    MlDsa44,
    MlDsa65,
    MlDsa87,
}

impl MlDsaLevel {
    pub const ALL: [MlDsaLevel; 3] = [MlDsaLevel::MlDsa44, MlDsaLevel::MlDsa65, MlDsaLevel::MlDsa87];

    /// `ml-dsa-44`, `ml-dsa-65`, `ml-dsa-87`.
    pub fn name(self) -> &'static str {
        match self {
            MlDsaLevel::MlDsa44 => "ml-dsa-44",
            MlDsaLevel::MlDsa65 => "ml-dsa-65",
            MlDsaLevel::MlDsa87 => "ml-dsa-87",
        }
    }

    /// Byte lengths (FIPS 204 Table 2): public key, signature.
    pub fn lens(self) -> (usize, usize) {
        match self {
            MlDsaLevel::MlDsa44 => (1312, 2420),
            MlDsaLevel::MlDsa65 => (1952, 3309),
            MlDsaLevel::MlDsa87 => (2592, 4627),
        }
    }
}

/// Signature schemes. The message is hashed inside `sign`/`verify` with `digest`
/// (Ed25519 hashes internally with SHA-512 and has no digest parameter; ML-DSA is "pure"
/// ML-DSA with an empty context string, FIPS 204 Algorithms 2 and 3, and has none either).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SigAlg {
    Rsa { bits: u32, digest: DigestAlg, padding: RsaPadding },
    EcdsaP256 { digest: DigestAlg },
    EcdsaP384 { digest: DigestAlg },
    Ed25519,
    /// Hedged (randomised) signing, as FIPS 204 recommends and TLS uses.
    MlDsa(MlDsaLevel),
}

/// Key agreement: derive a shared secret from our private key and the peer's public key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum KxAlg {
    X25519,
    EcdhP256,
    /// Finite-field DH over RFC 3526 MODP group 14 (2048-bit prime, generator 2), with a
    /// private exponent of [`FFDH2048_PRIVATE_BITS`] bits on every backend.
    Ffdh2048,
}

impl KxAlg {
    pub const ALL: [KxAlg; 3] = [KxAlg::X25519, KxAlg::EcdhP256, KxAlg::Ffdh2048];

    /// The prefix of the operation names: `x25519`, `ecdh-p256`, `ffdh-2048`.
    pub fn name(self) -> &'static str {
        match self {
            KxAlg::X25519 => "x25519",
            KxAlg::EcdhP256 => "ecdh-p256",
            KxAlg::Ffdh2048 => "ffdh-2048",
        }
    }

    /// Whether the public key has a validation beyond its encoding that a fresh exchange pays
    /// (NIST SP 800-56A Rev. 3 §5.6.2.3: FFC and ECC public keys; X25519 has none, RFC 7748),
    /// so that a `-derive-validated` operation exists for it.
    pub fn has_public_key_validation(self) -> bool {
        !matches!(self, KxAlg::X25519)
    }
}

/// Bits of the private exponent of an FFDH-2048 key pair (drawn uniformly from
/// [1, 2^225 − 1]), on every backend: the exponent length RFC 7919 Appendix A.1 gives for the
/// 2048-bit group (at least 225 bits), which OpenSSL 3 uses by default for the RFC 3526 group
/// of the same size, and within NIST SP 800-56A Rev. 3 §5.6.1.1.4 (2s ≤ N ≤ len(q), s = 112
/// bits of security for a 2048-bit prime, so N ≥ 224). AWS-LC would otherwise draw a
/// full-length (2047-bit) exponent, which costs about 7× as much per exponentiation: equal
/// lengths make a cross-backend comparison compare implementations, not exponent lengths.
pub const FFDH2048_PRIVATE_BITS: u32 = 225;

/// Key-encapsulation mechanisms: ML-KEM (FIPS 203), and the hybrid TLS key exchange
/// X25519MLKEM768 (draft-ietf-tls-ecdhe-mlkem) seen as a KEM, as TLS 1.3 sees every group:
///
/// - key generation = the client's key share: an ML-KEM-768 key pair and an X25519 key pair;
///   the encapsulation key is `ek (1184 bytes) || X25519 public key (32)`;
/// - encapsulation = the server's work on that share: ML-KEM-768 encapsulation to `ek`, then
///   X25519 with the client's public key, using the server's X25519 key pair (generated before,
///   see `x25519-keygen`); the ciphertext is `ML-KEM ciphertext (1088) || server's X25519
///   public key (32)`;
/// - decapsulation = the client's work on the server's share: ML-KEM-768 decapsulation and
///   X25519 with the server's public key.
///
/// The shared secret is `ML-KEM shared secret (32) || X25519 shared secret (32)`, ML-KEM first,
/// as the draft specifies for this group. It is built from the backend's own ML-KEM-768 and
/// X25519 (`backends::hybrid`), never from code of ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum KemAlg {
    MlKem512,
    MlKem768,
    MlKem1024,
    X25519MlKem768,
}

impl KemAlg {
    pub const ALL: [KemAlg; 4] =
        [KemAlg::MlKem512, KemAlg::MlKem768, KemAlg::MlKem1024, KemAlg::X25519MlKem768];

    /// `ml-kem-768`, `x25519mlkem768`, ...
    pub fn name(self) -> &'static str {
        match self {
            KemAlg::MlKem512 => "ml-kem-512",
            KemAlg::MlKem768 => "ml-kem-768",
            KemAlg::MlKem1024 => "ml-kem-1024",
            KemAlg::X25519MlKem768 => "x25519mlkem768",
        }
    }

    /// Human name for messages: "ML-KEM-768", "X25519MLKEM768".
    pub fn display(self) -> &'static str {
        match self {
            KemAlg::MlKem512 => "ML-KEM-512",
            KemAlg::MlKem768 => "ML-KEM-768",
            KemAlg::MlKem1024 => "ML-KEM-1024",
            KemAlg::X25519MlKem768 => "X25519MLKEM768",
        }
    }

    /// Byte lengths: encapsulation key, ciphertext, shared secret (FIPS 203 Table 3; for the
    /// hybrid, the TLS key shares and the concatenated secret).
    pub fn lens(self) -> (usize, usize, usize) {
        match self {
            KemAlg::MlKem512 => (800, 768, 32),
            KemAlg::MlKem768 => (1184, 1088, 32),
            KemAlg::MlKem1024 => (1568, 1568, 32),
            KemAlg::X25519MlKem768 => (1184 + 32, 1088 + 32, 64),
        }
    }

    /// The ML-KEM module rank k (FIPS 203 Table 2); dk = dkPKE (384k) || ek || H(ek) || z.
    pub fn rank(self) -> usize {
        match self {
            KemAlg::MlKem512 => 2,
            KemAlg::MlKem768 | KemAlg::X25519MlKem768 => 3,
            KemAlg::MlKem1024 => 4,
        }
    }
}

/// What a `-keygen` operation generates. Only key generation that happens per use in
/// practice is offered: ephemeral key-agreement key pairs (a key share per TLS handshake or
/// IKE exchange: `x25519-keygen`, `ecdh-p256-keygen` — the secp256r1 share FIPS configurations
/// use — and `ffdh-2048-keygen`), ML-KEM keys and, for comparison with RSA/ECDSA key generation
/// costs, ML-DSA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyGenAlg {
    /// A fresh key pair of a key agreement with its public key encoded
    /// (`backends::Backend::key_share`).
    Kx(KxAlg),
    Kem(KemAlg),
    /// Always an ML-DSA family ([`SigFamily::MlDsa`]).
    Sig(SigFamily),
}

/// One operation, as named on the command line and in study files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Digest(DigestAlg),
    Hmac(DigestAlg),
    Seal(AeadAlg),
    Open(AeadAlg),
    /// Family of the signature scheme; digest and padding come from [`Params`].
    Sign(SigFamily),
    Verify(SigFamily),
    Derive(KxAlg),
    Encaps(KemAlg),
    Decaps(KemAlg),
    /// Key-pair generation: the only operations whose key generation is inside the timed loop.
    Keygen(KeyGenAlg),
    /// A key agreement as a fresh exchange pays it (`-derive-validated`): the peer's public key
    /// parsed from its bytes and validated as the library's key exchange validates it, on every
    /// call, then the derive (`backends::Agreement::derive_validated`). `Derive` times the
    /// derive alone, with the peer's key parsed and validated once before timing (as `openssl
    /// speed` does). Only for algorithms with [`KxAlg::has_public_key_validation`].
    DeriveValidated(KxAlg),
}

/// A signature scheme before its parameters (digest, padding) are applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SigFamily {
    Rsa(u32),
    EcdsaP256,
    EcdsaP384,
    Ed25519,
    MlDsa(MlDsaLevel),
}

/// Every canonical operation name, in the order `hello` lists them.
pub const ALL_OPS: &[&str] = &[
    "sha1",
    "sha256",
    "sha384",
    "sha512",
    "sha3-256",
    "hmac-sha256",
    "aes-128-gcm-seal",
    "aes-128-gcm-open",
    "aes-256-gcm-seal",
    "aes-256-gcm-open",
    "chacha20-poly1305-seal",
    "chacha20-poly1305-open",
    "rsa2048-sign",
    "rsa2048-verify",
    "rsa3072-sign",
    "rsa3072-verify",
    "rsa4096-sign",
    "rsa4096-verify",
    "ecdsa-p256-sign",
    "ecdsa-p256-verify",
    "ecdsa-p384-sign",
    "ecdsa-p384-verify",
    "ed25519-sign",
    "ed25519-verify",
    "ml-dsa-44-keygen",
    "ml-dsa-44-sign",
    "ml-dsa-44-verify",
    "ml-dsa-65-keygen",
    "ml-dsa-65-sign",
    "ml-dsa-65-verify",
    "ml-dsa-87-keygen",
    "ml-dsa-87-sign",
    "ml-dsa-87-verify",
    "x25519-keygen",
    "x25519-derive",
    "ecdh-p256-keygen",
    "ecdh-p256-derive",
    "ecdh-p256-derive-validated",
    "ffdh-2048-keygen",
    "ffdh-2048-derive",
    "ffdh-2048-derive-validated",
    "ml-kem-512-keygen",
    "ml-kem-512-encaps",
    "ml-kem-512-decaps",
    "ml-kem-768-keygen",
    "ml-kem-768-encaps",
    "ml-kem-768-decaps",
    "ml-kem-1024-keygen",
    "ml-kem-1024-encaps",
    "ml-kem-1024-decaps",
    "x25519mlkem768-keygen",
    "x25519mlkem768-encaps",
    "x25519mlkem768-decaps",
];

impl Op {
    /// Parse a canonical name. `None` for an unknown name (the caller lists [`ALL_OPS`]).
    pub fn parse(name: &str) -> Option<Op> {
        if let Some(kx) = name.strip_suffix("-derive-validated") {
            return KxAlg::ALL
                .into_iter()
                .find(|k| k.name() == kx && k.has_public_key_validation())
                .map(Op::DeriveValidated);
        }
        if let Some(d) = DigestAlg::from_name(name) {
            return Some(Op::Digest(d));
        }
        if let Some(d) = name.strip_prefix("hmac-").and_then(DigestAlg::from_name) {
            return Some(Op::Hmac(d));
        }
        for aead in [AeadAlg::Aes128Gcm, AeadAlg::Aes256Gcm, AeadAlg::ChaCha20Poly1305] {
            if let Some(rest) = name.strip_prefix(aead.name()) {
                match rest {
                    "-seal" => return Some(Op::Seal(aead)),
                    "-open" => return Some(Op::Open(aead)),
                    _ => {}
                }
            }
        }
        let (family, verb) = name.rsplit_once('-')?;
        let fam = match family {
            "rsa2048" => Some(SigFamily::Rsa(2048)),
            "rsa3072" => Some(SigFamily::Rsa(3072)),
            "rsa4096" => Some(SigFamily::Rsa(4096)),
            "ecdsa-p256" => Some(SigFamily::EcdsaP256),
            "ecdsa-p384" => Some(SigFamily::EcdsaP384),
            "ed25519" => Some(SigFamily::Ed25519),
            _ => MlDsaLevel::ALL.into_iter().find(|l| l.name() == family).map(SigFamily::MlDsa),
        };
        match (fam, verb) {
            (Some(f), "sign") => return Some(Op::Sign(f)),
            (Some(f), "verify") => return Some(Op::Verify(f)),
            (Some(f @ SigFamily::MlDsa(_)), "keygen") => return Some(Op::Keygen(KeyGenAlg::Sig(f))),
            _ => {}
        }
        if let Some(kem) = KemAlg::ALL.into_iter().find(|k| k.name() == family) {
            return match verb {
                "keygen" => Some(Op::Keygen(KeyGenAlg::Kem(kem))),
                "encaps" => Some(Op::Encaps(kem)),
                "decaps" => Some(Op::Decaps(kem)),
                _ => None,
            };
        }
        match (family, verb) {
            (kx, "keygen" | "derive") => {
                let kx = KxAlg::ALL.into_iter().find(|k| k.name() == kx)?;
                Some(if verb == "keygen" { Op::Keygen(KeyGenAlg::Kx(kx)) } else { Op::Derive(kx) })
            }
            _ => None,
        }
    }

    /// Whether the operation processes a message whose size is the `size_bytes` parameter
    /// (digests, MACs, AEADs and signatures, which hash the message).
    pub fn is_sized(self) -> bool {
        matches!(
            self,
            Op::Digest(_) | Op::Hmac(_) | Op::Seal(_) | Op::Open(_) | Op::Sign(_) | Op::Verify(_)
        )
    }

    /// Whether the operation takes `digest` (and, for RSA, `padding`) parameters.
    pub fn takes_digest(self) -> bool {
        matches!(
            self,
            Op::Sign(f) | Op::Verify(f)
                if matches!(f, SigFamily::Rsa(_) | SigFamily::EcdsaP256 | SigFamily::EcdsaP384)
        )
    }

    /// Whether the operation takes a `padding` parameter (RSA signatures).
    pub fn takes_padding(self) -> bool {
        matches!(self, Op::Sign(SigFamily::Rsa(_)) | Op::Verify(SigFamily::Rsa(_)))
    }

    /// The message size used when a request gives none: 32 bytes for signatures, 1 KiB for
    /// other sized operations; `None` for operations without a message.
    pub fn default_size(self) -> Option<usize> {
        match self {
            _ if !self.is_sized() => None,
            Op::Sign(_) | Op::Verify(_) => Some(DEFAULT_SIGN_SIZE),
            _ => Some(DEFAULT_BULK_SIZE),
        }
    }

    /// The digest used when a request gives none: SHA-384 for P-384, SHA-256 for RSA and P-256;
    /// `None` for operations without a digest parameter.
    pub fn default_digest(self) -> Option<DigestAlg> {
        match self {
            _ if !self.takes_digest() => None,
            Op::Sign(SigFamily::EcdsaP384) | Op::Verify(SigFamily::EcdsaP384) => Some(DigestAlg::Sha384),
            _ => Some(DigestAlg::Sha256),
        }
    }

    /// The padding used when a request gives none (PKCS #1 v1.5), for RSA signatures.
    pub fn default_padding(self) -> Option<RsaPadding> {
        self.takes_padding().then_some(RsaPadding::Pkcs1)
    }

    /// The `params` fields a `run` request may give for this operation, in [`PARAM_NAMES`]
    /// order (`hello` lists them as `op_params`).
    pub fn param_names(self) -> Vec<&'static str> {
        let takes = [self.is_sized(), self.takes_digest(), self.takes_padding()];
        PARAM_NAMES.iter().zip(takes).filter(|(_, t)| *t).map(|(n, _)| *n).collect()
    }
}

/// Every field of a request's `params` ([`RawParams`]), in the order `hello` lists them.
pub const PARAM_NAMES: [&str; 3] = ["size_bytes", "digest", "padding"];

/// Resolved parameters of a case. Sizes in bytes. Serialised without the fields that do not
/// apply, e.g. `{"size_bytes": 32, "digest": "sha256", "padding": "pkcs1"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Message size in bytes, for sized operations (0 otherwise).
    pub size_bytes: usize,
    /// Digest used inside a signature; `None` where the scheme has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<DigestAlg>,
    /// RSA padding; `None` for other schemes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub padding: Option<RsaPadding>,
}

/// Default message size for sized operations: 1 KiB for bulk operations, 32 bytes
/// (a digest's worth, as a TLS handshake signs) for signatures.
pub const DEFAULT_BULK_SIZE: usize = 1024;
pub const DEFAULT_SIGN_SIZE: usize = 32;
/// Largest message a case may ask for: 64 MiB.
pub const MAX_SIZE: usize = 64 << 20;

/// Raw, not yet validated parameters as they arrive in a `run` request.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawParams {
    pub size_bytes: Option<u64>,
    pub digest: Option<String>,
    pub padding: Option<String>,
}

/// A parameter that does not fit its operation; the message names the field and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ParamError(pub String);

impl Params {
    /// Apply defaults and check every parameter against the operation.
    ///
    /// Errors: a size out of 1..=64 MiB, a size for an unsized operation, an unknown digest, a
    /// digest for a scheme without one, a padding for a non-RSA scheme.
    pub fn resolve(op: Op, raw: &RawParams) -> Result<Params, ParamError> {
        let size_bytes = match (op.default_size(), raw.size_bytes) {
            (Some(_), Some(0)) => {
                return Err(ParamError("size_bytes must be at least 1".into()));
            }
            (Some(_), Some(s)) if s > MAX_SIZE as u64 => {
                return Err(ParamError(format!(
                    "size_bytes {s} is larger than the limit {MAX_SIZE} (64 MiB)"
                )));
            }
            (Some(_), Some(s)) => s as usize,
            (Some(default), None) => default,
            (None, Some(_)) => {
                return Err(ParamError(
                    "size_bytes does not apply to this operation (it has no message)".into(),
                ));
            }
            (None, None) => 0,
        };
        let digest = match (op.default_digest(), &raw.digest) {
            (Some(_), Some(name)) => Some(DigestAlg::from_name(name).ok_or_else(|| {
                let known: Vec<_> = DigestAlg::ALL.iter().map(|d| d.name()).collect();
                ParamError(format!("unknown digest '{name}'; known: {}", known.join(", ")))
            })?),
            (default, None) => default,
            (None, Some(_)) => {
                return Err(ParamError(
                    "digest applies only to RSA and ECDSA signatures".into(),
                ));
            }
        };
        let padding = match (op.default_padding(), raw.padding.as_deref()) {
            (Some(_), Some(name)) => Some(RsaPadding::from_name(name).ok_or_else(|| {
                let known: Vec<_> = RsaPadding::ALL.iter().map(|p| p.name()).collect();
                ParamError(format!("unknown padding '{name}'; known: {}", known.join(", ")))
            })?),
            (default, None) => default,
            (None, Some(_)) => {
                return Err(ParamError("padding applies only to RSA signatures".into()));
            }
        };
        Ok(Params { size_bytes, digest, padding })
    }

    /// The signature scheme for a `Sign`/`Verify` family with these parameters.
    pub fn sig_alg(&self, family: SigFamily) -> SigAlg {
        let digest = self.digest.unwrap_or(DigestAlg::Sha256);
        match family {
            SigFamily::Rsa(bits) => SigAlg::Rsa {
                bits,
                digest,
                padding: self.padding.unwrap_or(RsaPadding::Pkcs1),
            },
            SigFamily::EcdsaP256 => SigAlg::EcdsaP256 { digest },
            SigFamily::EcdsaP384 => SigAlg::EcdsaP384 { digest },
            SigFamily::Ed25519 => SigAlg::Ed25519,
            SigFamily::MlDsa(level) => SigAlg::MlDsa(level),
        }
    }
}

impl fmt::Display for DigestAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_canonical_name_parses() {
        for name in ALL_OPS {
            assert!(Op::parse(name).is_some(), "{name} does not parse");
        }
        assert_eq!(Op::parse("sha265"), None);
        assert_eq!(Op::parse("rsa1024-sign"), None);
        assert_eq!(Op::parse("aes-128-gcm-sael"), None);
        assert_eq!(Op::parse("ml-kem-768-sign"), None);
        assert_eq!(Op::parse("ml-dsa-65-encaps"), None);
        assert_eq!(Op::parse("ed25519-keygen"), None);
        assert_eq!(Op::parse("x25519-derive-validated"), None, "X25519 has no public-key validation");
        assert_eq!(Op::parse("ffdh-2048-derive-validated"), Some(Op::DeriveValidated(KxAlg::Ffdh2048)));
        assert_eq!(Op::parse("ecdh-p256-derive"), Some(Op::Derive(KxAlg::EcdhP256)));
        // Every key agreement has its key share's generation, named as its derive is.
        for kx in KxAlg::ALL {
            assert_eq!(Op::parse(&format!("{}-keygen", kx.name())), Some(Op::Keygen(KeyGenAlg::Kx(kx))));
            assert_eq!(Op::parse(&format!("{}-derive", kx.name())), Some(Op::Derive(kx)));
        }
        assert_eq!(Op::parse("ml-dsa-66-sign"), None);
        assert_eq!(
            Op::parse("x25519mlkem768-encaps"),
            Some(Op::Encaps(KemAlg::X25519MlKem768))
        );
        assert_eq!(
            Op::parse("ml-dsa-65-keygen"),
            Some(Op::Keygen(KeyGenAlg::Sig(SigFamily::MlDsa(MlDsaLevel::MlDsa65))))
        );
        // Every name parses back to itself through the enums' names.
        assert_eq!(ALL_OPS.len(), ALL_OPS.iter().collect::<std::collections::HashSet<_>>().len());
    }

    #[test]
    fn post_quantum_params() {
        let sign = Op::parse("ml-dsa-65-sign").unwrap();
        let p = Params::resolve(sign, &RawParams::default()).unwrap();
        assert_eq!((p.size_bytes, p.digest, p.padding), (DEFAULT_SIGN_SIZE, None, None));
        let sized = RawParams { size_bytes: Some(4096), ..Default::default() };
        assert_eq!(Params::resolve(sign, &sized).unwrap().size_bytes, 4096);
        let digest = RawParams { digest: Some("sha256".into()), ..Default::default() };
        assert!(Params::resolve(sign, &digest).is_err());
        for name in ["ml-kem-768-keygen", "ml-dsa-44-keygen", "x25519-keygen", "ecdh-p256-keygen", "x25519mlkem768-decaps"] {
            let op = Op::parse(name).unwrap();
            assert!(!op.is_sized(), "{name}");
            assert!(Params::resolve(op, &sized).is_err(), "{name} has no message");
        }
    }

    #[test]
    fn params_defaults_and_errors() {
        let p = Params::resolve(Op::parse("rsa2048-sign").unwrap(), &RawParams::default()).unwrap();
        assert_eq!(p.digest, Some(DigestAlg::Sha256));
        assert_eq!(p.padding, Some(RsaPadding::Pkcs1));
        assert_eq!(p.size_bytes, DEFAULT_SIGN_SIZE);
        let p384 = Params::resolve(Op::parse("ecdsa-p384-verify").unwrap(), &RawParams::default());
        assert_eq!(p384.unwrap().digest, Some(DigestAlg::Sha384));
        let bad_size = RawParams { size_bytes: Some(0), ..Default::default() };
        assert!(Params::resolve(Op::parse("sha256").unwrap(), &bad_size).is_err());
        let no_msg = RawParams { size_bytes: Some(16), ..Default::default() };
        assert!(Params::resolve(Op::parse("x25519-derive").unwrap(), &no_msg).is_err());
        let digest_on_ed = RawParams { digest: Some("sha1".into()), ..Default::default() };
        assert!(Params::resolve(Op::parse("ed25519-sign").unwrap(), &digest_on_ed).is_err());
        let bad_digest = RawParams { digest: Some("md5".into()), ..Default::default() };
        assert!(Params::resolve(Op::parse("rsa2048-sign").unwrap(), &bad_digest).is_err());
        let bad_padding = RawParams { padding: Some("oaep".into()), ..Default::default() };
        let e = Params::resolve(Op::parse("rsa2048-sign").unwrap(), &bad_padding).unwrap_err();
        assert_eq!(e.to_string(), "unknown padding 'oaep'; known: pkcs1, pss");
    }

    /// What `hello` announces per operation is what `Params::resolve` fills in.
    #[test]
    fn param_names_and_defaults_are_the_resolvers() {
        let names = |n: &str| Op::parse(n).unwrap().param_names();
        assert_eq!(names("rsa3072-verify"), ["size_bytes", "digest", "padding"]);
        assert_eq!(names("ecdsa-p384-sign"), ["size_bytes", "digest"]);
        assert_eq!(names("ed25519-sign"), ["size_bytes"]);
        assert_eq!(names("aes-128-gcm-open"), ["size_bytes"]);
        assert!(names("ml-kem-768-encaps").is_empty());
        for name in ALL_OPS {
            let op = Op::parse(name).unwrap();
            let p = Params::resolve(op, &RawParams::default()).unwrap();
            assert_eq!(op.default_size().unwrap_or(0), p.size_bytes, "{name}");
            assert_eq!(op.default_digest(), p.digest, "{name}");
            assert_eq!(op.default_padding(), p.padding, "{name}");
        }
        for p in RsaPadding::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
            assert_eq!(RsaPadding::from_name(p.name()), Some(p));
        }
        for d in DigestAlg::ALL {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
        }
    }
}
