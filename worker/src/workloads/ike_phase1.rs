//! `ike-phase1`: the public-key work of one side of an IKE phase 1 (IKEv2 IKE_SA_INIT +
//! IKE_AUTH, RFC 7296) as one workload transaction, built only from a backend's prepared
//! primitives ([`Backend`]): no crypto of ours.
//!
//! One transaction, in the order a responder does it:
//!
//! 1. **DH key generation**: a fresh ephemeral key pair from the library's random generator
//!    (`Backend::agreement(alg, None)`) and its encoded public value (our KE payload);
//! 2. **DH agreement** with the peer's public value (the peer's KE payload, fixed for the
//!    prepared instance); the shared secret must have the group's length;
//! 3. **RSA signature** over our signed octets (our AUTH payload, RFC 7296 §2.15), which contain
//!    the KE payload just generated, so the signature cannot be precomputed;
//! 4. **RSA verification** of the peer's AUTH signature over the peer's signed octets; a
//!    signature that does not verify fails the transaction.
//!
//! Groups ([`IkeGroup`]): MODP-2048 (RFC 3526 group 14, IKE transform 14), ECP-256 (RFC 5903
//! group 19, ECDH over P-256) and Curve25519 (RFC 8031 group 31, X25519). Signatures: RSA
//! PKCS#1 v1.5 (RFC 7296 auth method 1, or RFC 7427 digital signature with PKCS#1 v1.5) with
//! the fixed RSA key of `ops::keys` of the requested size and the requested digest. Both peers
//! use that one fixed key (there is one key per size): the work is the same as with two keys.
//!
//! With `stack` naming another library than the cell's backend, the signature of step 3 is the
//! backend's (e.g. `pkcs11`: the AUTH key on a token) and steps 1, 2 and 4 are that library's,
//! as an IKE daemon with its private key in an HSM does them.
//!
//! Not included: the PRF/key derivation (SKEYSEED, prf+), the AEAD of IKE_AUTH, nonce
//! generation and certificate parsing; this workload times the asymmetric operations, which
//! dominate an IKE SA set-up.

use super::base::{choice, number, object, text, Common, Finish, Mode, Params, TransactionName,
                  Workload, WorkloadCase, WorkloadSpec, COMMON_PARAMS};
use crate::measure::load::{run_load_with, TxnFn};
use crate::measure::{companion_cpu_between, companion_cpu_ns};
use crate::measure::sampler::Sampler;
use crate::result::{IkeResult, Measured, WorkloadDetail};
use crate::backends::{self, Backend, BackendError, Signer, Verifier};
use crate::kat::{self, CrossCheck, KatStatus, Validation};
use crate::measure::OpFn;
use crate::ops::{keys, DigestAlg, KxAlg, Op, RsaPadding, SigAlg, SigFamily};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The Diffie-Hellman group of the exchange (IKEv2 transform type 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum IkeGroup {
    /// RFC 3526 group 14: 2048-bit MODP finite-field DH, generator 2 (`modp2048`).
    #[serde(rename = "modp2048")]
    Modp2048,
    /// RFC 5903 group 19: ECDH over NIST P-256 (`ecp256`).
    #[serde(rename = "ecp256")]
    Ecp256,
    /// RFC 8031 group 31: X25519 (`x25519`).
    #[serde(rename = "x25519")]
    X25519,
}

impl IkeGroup {
    /// Every group, in the order they are listed.
    pub const ALL: [IkeGroup; 3] = [IkeGroup::Modp2048, IkeGroup::Ecp256, IkeGroup::X25519];

    /// The group named `name` (`modp2048`, `ecp256`, `x25519`), or `None`.
    pub fn parse(name: &str) -> Option<IkeGroup> {
        IkeGroup::ALL.into_iter().find(|g| g.name() == name)
    }

    /// Canonical lower-case name: `modp2048`, `ecp256`, `x25519`.
    pub fn name(self) -> &'static str {
        match self {
            IkeGroup::Modp2048 => "modp2048",
            IkeGroup::Ecp256 => "ecp256",
            IkeGroup::X25519 => "x25519",
        }
    }

    /// The key agreement the backends offer for this group.
    pub fn kx(self) -> KxAlg {
        match self {
            IkeGroup::Modp2048 => KxAlg::Ffdh2048,
            IkeGroup::Ecp256 => KxAlg::EcdhP256,
            IkeGroup::X25519 => KxAlg::X25519,
        }
    }

    /// Length in bytes of the shared secret (RFC 7296 §2.14 g^ir: the prime's length for
    /// MODP, the x-coordinate for ECP, RFC 8031 §2.1 32 bytes for Curve25519).
    pub fn secret_len(self) -> usize {
        match self {
            IkeGroup::Modp2048 => 256,
            IkeGroup::Ecp256 | IkeGroup::X25519 => 32,
        }
    }

    /// Length in bytes of the public value (the KE payload's key exchange data): 256 (MODP),
    /// 65 (uncompressed P-256 point, as the backends encode it; RFC 5903 sends x || y, 64),
    /// 32 (X25519).
    pub fn public_len(self) -> usize {
        match self {
            IkeGroup::Modp2048 => 256,
            IkeGroup::Ecp256 => 65,
            IkeGroup::X25519 => 32,
        }
    }
}

/// The workload's name in a `run` request's `op`.
pub const NAME: &str = "ike-phase1";
/// This workload's own parameters (`hello`'s `op_params`).
pub const PARAMS: [&str; 4] = ["dh_group", "rsa_bits", "digest", "stack"];

/// The values a parameter takes when not given.
pub fn defaults() -> Map<String, Value> {
    object(json!({"dh_group": "modp2048", "rsa_bits": 2048, "digest": "sha256", "load": "closed:1", "mode": "memory"}))
}

/// Check a request's `dh_group`, `rsa_bits` and `digest` (the common workload parameters are
/// checked against the spec first). Errors: one line naming the parameter and its values.
pub fn parse_params(params: &Map<String, Value>) -> Result<IkeParams, String> {
    let groups: Vec<&str> = IkeGroup::ALL.iter().map(|g| g.name()).collect();
    let group = choice("dh_group", &text(params, "dh_group", "modp2048")?, IkeGroup::parse, &groups)?;
    let rsa_bits = number(params, "rsa_bits", 2048, 2048..=4096)? as u32;
    if ![2048, 3072, 4096].contains(&rsa_bits) {
        return Err(format!("rsa_bits must be 2048, 3072 or 4096, got {rsa_bits}"));
    }
    let digests: Vec<&str> = DigestAlg::ALL.iter().map(|d| d.name()).collect();
    let digest = choice("digest", &text(params, "digest", "sha256")?, DigestAlg::from_name, &digests)?;
    let stack = match params.get("stack") {
        None => None,
        Some(_) => {
            let stacks: Vec<&'static str> = super::tls::Stack::ALL.iter().map(|s| s.backend()).collect();
            Some(choice("stack", &text(params, "stack", "")?, |n| stacks.iter().copied().find(|b| *b == n), &stacks)?)
        }
    };
    Ok(IkeParams { group, rsa_bits, digest, stack })
}

/// The `ike-phase1` workload: both sides' crypto in this process (there is no server process).
pub struct IkePhase1;

impl Workload for IkePhase1 {
    type Request = IkeParams;

    const NAME: &'static str = NAME;

    fn spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            own_params: &PARAMS,
            common_params: &COMMON_PARAMS,
            param_values: vec![
                ("dh_group", IkeGroup::ALL.iter().map(|g| g.name().to_string()).collect()),
                ("stack", super::tls::Stack::backend_names()),
            ],
            defaults: defaults(),
            ..WorkloadSpec::windowed(
                &[Mode::Memory],
                TransactionName { one: "exchange", many: "exchanges" },
            )
        }
    }

    fn parse(&self, _: &str, params: &Params, _: &Common) -> Result<IkeParams, String> {
        parse_params(params)
    }

    fn check(&self, p: &IkeParams, backend: &dyn Backend) -> Result<(), String> {
        match prepare(backend, p) {
            Err(BackendError::Unsupported(r)) => Err(r),
            _ => Ok(()),
        }
    }

    fn run(&self, p: &IkeParams, case: &WorkloadCase, backend: &dyn Backend, warmup: Duration, budget: Duration) -> Finish {
        run(backend, p, &case.common, warmup, budget)
    }
}

/// Validate the transaction's parts, then run it at the load level in this process.
fn run(backend: &dyn Backend, p: &IkeParams, common: &Common, warmup: Duration, budget: Duration) -> Finish {
    let validation = match validate(backend, p) {
        Ok(v) => v,
        Err(BackendError::Unsupported(r)) => return Finish::Unsupported(r, None),
        Err(BackendError::Failed(e)) => return Finish::Invalid(format!("validation could not run: {e}"), None),
    };
    if let Some(why) = validation.failure() {
        return Finish::Invalid(why, Some(validation.into()));
    }
    // A backend whose work runs in a daemon (a token's): its CPU over the window, read where
    // the window starts (after the warm-up) and after it ends.
    let companion = backend.companion();
    let mut before = Ok(None);
    let timeline = Sampler::start();
    let measured = run_load_with(|| prepare(backend, p).map(|f| f as TxnFn), common.load, warmup, budget, || {
        before = companion_cpu_ns(companion.as_ref());
        before.as_ref().map(drop).map_err(|e| BackendError::Failed(e.to_string()))
    });
    let client_timeline = timeline.stop();
    let device_cpu = companion_cpu_between(before, companion_cpu_ns(companion.as_ref()));
    let measured = measured.and_then(|lm| device_cpu.map(|d| (lm, d)));
    match measured {
        Ok((lm, device_process_cpu_ns)) => Finish::Ok(super::base::Outcome {
            measured: Measured { device_process_cpu_ns, ..Measured::of_load(&lm, 0) },
            validation: Some(validation.into()),
            detail: WorkloadDetail::Ike(IkeResult { client_timeline }),
        }),
        Err(BackendError::Unsupported(r)) => Finish::Unsupported(r, Some(validation.into())),
        Err(BackendError::Failed(e)) => Finish::Invalid(format!("transaction failed while measured: {e}"), Some(validation.into())),
    }
}

/// Parameters of an `ike-phase1` transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct IkeParams {
    /// The Diffie-Hellman group.
    pub group: IkeGroup,
    /// RSA modulus size in bits: 2048, 3072 or 4096 (the fixed keys of `ops::keys`); any other
    /// size is refused by [`prepare`] and [`validate`] as `Failed`.
    pub rsa_bits: u32,
    /// The digest inside the RSA signatures (PKCS#1 v1.5).
    pub digest: DigestAlg,
    /// The library that does the DH key generation and agreement and verifies the peer's
    /// signature, when not the cell's backend (which then makes our signature alone): one a
    /// protocol stack of this worker is built on (`aws-lc`, `ring`, `openssl`), as `tls-handshake`'s.
    pub stack: Option<&'static str>,
}

impl IkeParams {
    /// The signature scheme of both AUTH payloads.
    pub fn sig_alg(&self) -> SigAlg {
        SigAlg::Rsa { bits: self.rsa_bits, digest: self.digest, padding: RsaPadding::Pkcs1 }
    }

    /// The library doing the exchange's other operations, when it is not `signing` itself.
    fn stack(&self, signing: &dyn Backend) -> Result<Option<Box<dyn Backend>>, BackendError> {
        match self.stack.filter(|s| *s != signing.info().backend) {
            None => Ok(None),
            Some(name) => backends::by_name(name).map(Some).ok_or_else(|| BackendError::Failed(format!("no backend '{name}'"))),
        }
    }

    fn check(&self) -> Result<(), BackendError> {
        match self.rsa_bits {
            2048 | 3072 | 4096 => Ok(()),
            bits => Err(BackendError::Failed(format!(
                "ike-phase1: no fixed RSA key of {bits} bits (2048, 3072 or 4096)"
            ))),
        }
    }
}

/// Bytes of the signed octets before the KE payload's data: IKE header (28), SA payload with
/// one proposal (48), KE payload header (8). After it: Nonce payload (4 + 32 bytes), the
/// peer's nonce (32) and prf(SK_p, ID') (the digest's length). Sizes of a typical
/// IKE_SA_INIT; only the length matters for the cost of hashing them.
const BEFORE_KE: usize = 28 + 48 + 8;
const AFTER_KE: usize = 4 + 32 + 32;
/// Fill byte of our signed octets and, different, of the peer's.
const OUR_BYTE: u8 = 0x49;
const PEER_BYTE: u8 = 0x52;

/// One side's prepared phase-1 crypto. Everything fixed (parsed keys, the peer's signed
/// octets, signature and public value) is built once; [`Transaction::run`] does the
/// per-exchange work.
struct Transaction {
    /// The backend again, owned: key generation calls it in every transaction.
    backend: Box<dyn Backend>,
    group: IkeGroup,
    /// Whether to hold the secret to the group's length (real backends; the scripted mock
    /// returns fixed 32-byte outputs).
    exact_len: bool,
    signer: Box<dyn Signer>,
    verifier: Box<dyn Verifier>,
    /// Our signed octets; the KE data goes at `BEFORE_KE..BEFORE_KE + public_len`.
    our_octets: Vec<u8>,
    peer_octets: Vec<u8>,
    peer_sig: Vec<u8>,
    /// The peer's KE data.
    peer_public: Vec<u8>,
    /// The public key our signatures verify with (the fixed key's, or one the signing backend
    /// generated).
    public: Vec<u8>,
}

/// What one transaction produced, for the checks.
struct Outcome {
    our_public: Vec<u8>,
    secret: Vec<u8>,
    signature: Vec<u8>,
}

impl Transaction {
    /// Our signature on `signing`, the rest on `p.stack` (or `signing` too).
    fn new(signing: &dyn Backend, p: &IkeParams) -> Result<Transaction, BackendError> {
        p.check()?;
        let alg = p.sig_alg();
        let key = keys::signing_key(SigFamily::Rsa(p.rsa_bits));
        let (mut signer, public) = backends::signing_pair(signing, alg, &key)?;
        let stack = p.stack(signing)?;
        let backend = stack.as_deref().unwrap_or(signing);
        let verifier = backend.verifier(alg, &public)?;
        // Fail early, with the library's reason, when the group is missing.
        let kx = p.group.kx();
        let ours = backend.agreement(kx, None).map_err(|e| in_group(e, p.group))?;
        drop(ours);
        let peer_public = match keys::agreement_keys(kx) {
            // X25519: RFC 7748 Bob; ECP-256: the fixed ECDH peer key.
            Some((_, peer)) => peer.public.to_vec(),
            // MODP: the peer's key pair generated once, here.
            None => backend.agreement(kx, None)?.public_key(),
        };
        let len = BEFORE_KE + p.group.public_len() + AFTER_KE + p.digest.output_len();
        let peer_octets = vec![PEER_BYTE; len];
        let peer_sig = signer.sign(&peer_octets)?;
        let backend = backend.owned().ok_or_else(|| {
            BackendError::Failed(format!("backend {} cannot be re-created for key generation", backend.info().backend))
        })?;
        Ok(Transaction {
            exact_len: backends::NAMES.contains(&backend.info().backend),
            backend,
            group: p.group,
            signer,
            verifier,
            our_octets: vec![OUR_BYTE; len],
            peer_octets,
            peer_sig,
            peer_public,
            public,
        })
    }

    /// One transaction: DH key generation, DH agreement, sign, verify.
    ///
    /// Errors: `Failed` when the peer's signature does not verify, when the secret is empty or
    /// not the group's length, or when the library fails.
    fn run(&mut self) -> Result<Outcome, BackendError> {
        let mut ours = self.backend.agreement(self.group.kx(), None)?;
        let our_public = ours.public_key();
        let secret = ours.derive(&self.peer_public)?;
        if secret.is_empty() || (self.exact_len && secret.len() != self.group.secret_len()) {
            return Err(BackendError::Failed(format!(
                "ike-phase1 {}: shared secret is {} bytes, expected {}",
                self.group.name(),
                secret.len(),
                self.group.secret_len()
            )));
        }
        let ke = BEFORE_KE..(BEFORE_KE + our_public.len()).min(self.our_octets.len());
        let n = ke.len();
        self.our_octets[ke].copy_from_slice(&our_public[..n]);
        let signature = self.signer.sign(&self.our_octets)?;
        if !self.verifier.verify(&self.peer_octets, &self.peer_sig)? {
            return Err(BackendError::Failed("ike-phase1: the peer's AUTH signature did not verify".into()));
        }
        Ok(Outcome { our_public, secret, signature })
    }
}

/// Name the group in an `Unsupported` reason from the key agreement.
fn in_group(e: BackendError, group: IkeGroup) -> BackendError {
    match e {
        BackendError::Unsupported(why) => {
            BackendError::Unsupported(format!("no ike-phase1 with {}: {why}", group.name()))
        }
        e => e,
    }
}

/// Prepare one side's phase-1 crypto on `backend`; each call of the returned closure performs
/// one transaction (DH key generation, DH agreement, RSA signature, RSA verification; see the
/// module documentation). One transaction is run here, untimed, so a missing algorithm or a
/// broken one is reported before any timing.
///
/// Errors: `Unsupported` (with the library's reason) when the backend lacks the RSA signature
/// with this digest or the group's key agreement with generated keys (ring has no reusable
/// key agreement; RustCrypto has no FFDH); `Failed` for an RSA size without a
/// fixed key or a library failure. The closure returns `Err(Failed)` when the peer's signature
/// does not verify or the shared secret is empty or not the group's length.
pub fn prepare(backend: &dyn Backend, p: &IkeParams) -> Result<OpFn, BackendError> {
    let mut t = Transaction::new(backend, p)?;
    t.run()?;
    Ok(Box::new(move || t.run().map(drop)))
}

/// Before timing: check the transaction's parts as the primitives are checked, and the
/// transaction itself against every other real backend.
///
/// - Known-answer tests and cross-backend checks of the parts, through [`kat::validate`]:
///   `rsa{bits}-sign` and `rsa{bits}-verify` (PKCS#1 v1.5 with `digest`, on the transaction's
///   signed-octet size) and the group's `-derive` (RFC 7748 §6.1 for X25519, NIST CAVP for
///   P-256, a consistency check for MODP-2048 whose keys are always generated). Their
///   cross checks are reported with the part's name in front of the detail.
/// - Per other backend, on one real transaction: our AUTH signature verifies with the other
///   backend (and a tampered one does not), and, with the peer's KE data replaced by a key
///   pair the other backend generated, both sides derive the same secret. A backend that lacks
///   the signature or the group is "skipped".
///
/// The scripted `mock` backend gets "not applicable", as in [`kat::validate`].
///
/// Errors: as [`prepare`] (`Unsupported` when the backend lacks a part). A wrong answer is not
/// an error but a failed [`Validation`].
pub fn validate(backend: &dyn Backend, p: &IkeParams) -> Result<Validation, BackendError> {
    let own = backend.info().backend;
    let others: Vec<Box<dyn Backend>> =
        backends::NAMES.iter().filter(|&&n| n != own).filter_map(|n| backends::by_name(n)).collect();
    validate_against(backend, p, &others)
}

/// [`validate`] against an explicit list of backends (tests put a broken one there).
fn validate_against(backend: &dyn Backend, p: &IkeParams, others: &[Box<dyn Backend>]) -> Result<Validation, BackendError> {
    let mut t = Transaction::new(backend, p)?;
    let own = backend.info().backend;
    if !backends::NAMES.contains(&own) && !backends::DEVICES.contains(&own) {
        return Ok(Validation {
            kat: KatStatus::NotApplicable(format!("{own} is a scripted test backend")),
            kat_source: String::new(),
            cross_checks: vec![],
        });
    }
    let family = SigFamily::Rsa(p.rsa_bits);
    let sig_params = crate::ops::Params {
        size_bytes: t.our_octets.len(),
        digest: Some(p.digest),
        padding: Some(RsaPadding::Pkcs1),
    };
    let kx_params = crate::ops::Params { size_bytes: 0, digest: None, padding: None };
    // Our signature on the backend; verification and DH on the stack when one is named.
    let stack = p.stack(backend)?;
    let rest = stack.as_deref().unwrap_or(backend);
    let parts = [
        (format!("rsa{}-sign", p.rsa_bits), Op::Sign(family), sig_params, backend),
        (format!("rsa{}-verify", p.rsa_bits), Op::Verify(family), sig_params, rest),
        (derive_name(p.group), Op::Derive(p.group.kx()), kx_params, rest),
    ];
    let mut kats = Vec::new();
    let mut sources = Vec::new();
    let mut cross_checks = Vec::new();
    for (name, op, params, on) in parts {
        // (The stack's parts are checked against the libraries other than the stack.)
        let stack_others: Vec<Box<dyn Backend>>;
        let theirs = if on.info().backend == own {
            others
        } else {
            stack_others = backends::NAMES.iter().filter(|&&n| n != on.info().backend).filter_map(|n| backends::by_name(n)).collect();
            &stack_others
        };
        let v = kat::validate_against(on, op, &params, theirs).map_err(|e| in_group(e, p.group))?;
        if v.kat.failed() {
            kats.push(format!("{name}: {}", v.kat));
        }
        sources.push(format!("{name}: {}", v.kat_source));
        cross_checks.extend(v.cross_checks.into_iter().map(|c| CrossCheck { detail: format!("{name}: {}", c.detail), ..c }));
    }
    for other in others {
        let with = other.info().backend.to_string();
        let (status, detail) = match transaction_cross_check(&mut t, p, &**other) {
            Ok(detail) => ("pass", detail),
            Err(BackendError::Unsupported(why)) => ("skipped", why),
            Err(BackendError::Failed(why)) => ("fail", why),
        };
        cross_checks.push(CrossCheck { with, status, detail: format!("ike-phase1: {detail}") });
    }
    Ok(Validation {
        kat: match kats.is_empty() {
            true => KatStatus::Pass,
            false => KatStatus::Fail(kats.join("; ")),
        },
        kat_source: sources.join("; "),
        cross_checks,
    })
}

/// The canonical name of the group's `-derive` operation.
fn derive_name(group: IkeGroup) -> String {
    match group {
        IkeGroup::Modp2048 => "ffdh-2048-derive",
        IkeGroup::Ecp256 => "ecdh-p256-derive",
        IkeGroup::X25519 => "x25519-derive",
    }
    .into()
}

/// One transaction of `t` checked by `other`: the AUTH signature verifies there (and a
/// tampered one does not), and a DH exchange with a key pair `other` generated agrees.
fn transaction_cross_check(t: &mut Transaction, p: &IkeParams, other: &dyn Backend) -> Result<String, BackendError> {
    let mut verifier = other.verifier(p.sig_alg(), &t.public)?;
    let mut theirs = other.agreement(p.group.kx(), None).map_err(|e| in_group(e, p.group))?;
    let fixed_peer = std::mem::replace(&mut t.peer_public, theirs.public_key());
    let outcome = t.run();
    t.peer_public = fixed_peer;
    let Outcome { our_public, secret, signature } = outcome?;
    let fail = |why: String| Err(BackendError::Failed(why));
    match verifier.verify(&t.our_octets, &signature) {
        Ok(true) => {}
        Ok(false) => return fail("our AUTH signature did not verify with the other".into()),
        Err(e) => return fail(format!("verifying our AUTH signature failed with the other: {e}")),
    }
    let mut tampered = signature.clone();
    if let Some(last) = tampered.last_mut() {
        *last ^= 1;
    }
    if let Ok(true) = verifier.verify(&t.our_octets, &tampered) {
        return fail("a tampered AUTH signature verified with the other".into());
    }
    let theirs_secret = theirs.derive(&our_public)?;
    if let Err(why) = kat::same(&format!("{} shared secrets of both sides", p.group.name()), &secret, &theirs_secret) {
        return fail(why);
    }
    Ok(format!(
        "our AUTH signature verifies with the other, and our fresh {} key agrees with one it generated ({}-byte secret)",
        p.group.name(),
        secret.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::Agreement;

    fn params(group: IkeGroup) -> IkeParams {
        IkeParams { group, rsa_bits: 2048, digest: DigestAlg::Sha256, stack: None }
    }

    /// Which real backends have each group with generated keys (from their module docs).
    fn expected(backend: &str, group: IkeGroup) -> bool {
        match (backend, group) {
            ("ring", _) => false,
            ("rustcrypto", IkeGroup::Modp2048) => false,
            _ => true,
        }
    }

    #[test]
    fn names_round_trip() {
        for g in IkeGroup::ALL {
            assert_eq!(IkeGroup::parse(g.name()), Some(g));
            assert_eq!(serde_json::to_value(g).unwrap(), g.name());
        }
        assert_eq!(IkeGroup::parse("modp1024"), None);
    }

    #[test]
    fn every_backend_and_group_runs_or_says_why_not() {
        for name in backends::NAMES {
            let b = backends::by_name(name).unwrap();
            for g in IkeGroup::ALL {
                match prepare(&*b, &params(g)) {
                    Ok(mut f) => {
                        assert!(expected(name, g), "{name} {}: unexpectedly supported", g.name());
                        for i in 0..3 {
                            f().unwrap_or_else(|e| panic!("{name} {} transaction {i}: {e}", g.name()));
                        }
                    }
                    Err(BackendError::Unsupported(why)) => {
                        assert!(!expected(name, g), "{name} {}: unsupported: {why}", g.name());
                        assert!(why.contains(g.name()) && why.len() > 20, "{name}: reason '{why}'");
                    }
                    Err(e) => panic!("{name} {}: {e}", g.name()),
                }
            }
        }
    }

    #[test]
    fn each_transaction_generates_a_fresh_key_and_a_secret_of_the_group_length() {
        let b = backends::by_name("openssl").unwrap();
        for g in IkeGroup::ALL {
            let mut t = Transaction::new(&*b, &params(g)).unwrap();
            let (x, y) = (t.run().unwrap(), t.run().unwrap());
            assert_ne!(x.our_public, y.our_public, "{}", g.name());
            assert_eq!(x.our_public.len(), g.public_len());
            assert_eq!((x.secret.len(), y.secret.len()), (g.secret_len(), g.secret_len()));
            assert_ne!(x.secret, y.secret, "{}", g.name());
            // The signature covers the fresh KE data.
            assert_ne!(x.signature, y.signature, "{}", g.name());
            assert_eq!(x.signature.len(), 256);
        }
    }

    #[test]
    fn a_corrupted_peer_signature_fails_the_transaction() {
        for name in ["openssl", "aws-lc", "rustcrypto"] {
            let b = backends::by_name(name).unwrap();
            let mut t = Transaction::new(&*b, &params(IkeGroup::X25519)).unwrap();
            t.run().unwrap();
            let last = t.peer_sig.len() - 1;
            t.peer_sig[last] ^= 1;
            match t.run() {
                Err(BackendError::Failed(why)) => assert!(why.contains("did not verify"), "{name}: {why}"),
                Err(e) => panic!("{name}: not a failure: {e}"),
                Ok(_) => panic!("{name}: a corrupted peer signature was accepted"),
            }
        }
    }

    #[test]
    fn a_secret_that_is_empty_or_of_the_wrong_length_fails_the_transaction() {
        let b = backends::by_name("openssl").unwrap();
        for keep in [0, 31] {
            let mut t = Transaction::new(&*b, &params(IkeGroup::Ecp256)).unwrap();
            t.run().unwrap();
            t.backend = Box::new(Liar { keep: Some(keep) });
            match t.run() {
                Err(BackendError::Failed(why)) => assert!(why.contains(&format!("is {keep} bytes")), "{why}"),
                other => panic!("a {keep}-byte secret: {:?}", other.map(|o| o.secret.len())),
            }
        }
        // A peer value the library refuses (X25519's all-zero, small-order point) fails too.
        let mut t = Transaction::new(&*b, &params(IkeGroup::X25519)).unwrap();
        t.peer_public = vec![0; 32];
        assert!(matches!(t.run(), Err(BackendError::Failed(_))));
    }

    #[test]
    fn validate_passes_where_supported() {
        for name in backends::NAMES {
            let b = backends::by_name(name).unwrap();
            for g in IkeGroup::ALL {
                match validate(&*b, &params(g)) {
                    Ok(v) => {
                        assert!(v.passed(), "{name} {}: {:?}", g.name(), v.failure());
                        assert_eq!(v.kat, "pass", "{name} {}", g.name());
                        let ike: Vec<_> = v.cross_checks.iter().filter(|c| c.detail.starts_with("ike-phase1:")).collect();
                        assert_eq!(ike.len(), backends::NAMES.len() - 1);
                        assert!(v.kat_source.contains(&derive_name(g)), "{}", v.kat_source);
                        serde_json::to_value(&v).unwrap();
                    }
                    Err(BackendError::Unsupported(_)) => assert!(!expected(name, g), "{name} {}", g.name()),
                    Err(e) => panic!("{name} {}: {e}", g.name()),
                }
            }
        }
        let mock = backends::by_name("mock").unwrap();
        assert!(validate(&*mock, &params(IkeGroup::X25519)).unwrap().kat.to_string().starts_with("not applicable"));
    }

    /// For each group, the secret of an OpenSSL transaction equals the other side's computation
    /// on every other backend that has the group (MODP-2048: AWS-LC only).
    #[test]
    fn dh_secret_agrees_with_another_backend() {
        for g in IkeGroup::ALL {
            let b = backends::by_name("openssl").unwrap();
            let mut t = Transaction::new(&*b, &params(g)).unwrap();
            let mut agreed = 0;
            for other in ["aws-lc", "rustcrypto", "ring"] {
                let o = backends::by_name(other).unwrap();
                match transaction_cross_check(&mut t, &params(g), &*o) {
                    Ok(detail) => {
                        assert!(detail.contains("agrees"), "{detail}");
                        agreed += 1;
                    }
                    Err(BackendError::Unsupported(_)) => assert!(!expected(other, g), "{other} {}", g.name()),
                    Err(e) => panic!("{other} {}: {e}", g.name()),
                }
            }
            // aws-lc and RustCrypto have ECP-256 and X25519 with generated keys; of them only
            // AWS-LC has MODP-2048.
            let want = if g == IkeGroup::Modp2048 { 1 } else { 2 };
            assert_eq!(agreed, want, "{}", g.name());
        }
    }

    /// A backend on the other side whose secrets are wrong makes the validation fail, in the
    /// transaction's own check.
    #[test]
    fn a_disagreeing_backend_fails_validation() {
        let b = backends::by_name("openssl").unwrap();
        let v = validate_against(&*b, &params(IkeGroup::X25519), &[Box::new(Liar { keep: None })]).unwrap();
        assert!(!v.passed());
        assert!(v.failure().unwrap().contains("liar"), "{:?}", v.failure());
        assert!(
            v.cross_checks.iter().any(|c| c.with == "liar" && c.status == "fail" && c.detail.starts_with("ike-phase1:")),
            "{:?}",
            v.cross_checks
        );
    }

    /// OpenSSL whose shared secrets are wrong: first byte flipped (`keep` = `None`) or cut to
    /// `keep` bytes.
    #[derive(Clone, Copy)]
    struct Liar {
        keep: Option<usize>,
    }
    struct LyingAgreement(Box<dyn Agreement>, Option<usize>);
    impl Agreement for LyingAgreement {
        fn public_key(&self) -> Vec<u8> {
            self.0.public_key()
        }
        fn derive(&mut self, peer: &[u8]) -> Result<Vec<u8>, BackendError> {
            let mut s = self.0.derive(peer)?;
            match self.1 {
                Some(keep) => s.truncate(keep),
                None => s[0] ^= 1,
            }
            Ok(s)
        }
    }
    impl Backend for Liar {
        fn info(&self) -> backends::LibraryInfo {
            backends::LibraryInfo { backend: "liar", ..backends::openssl::OpenSsl.info() }
        }
        fn verifier(&self, alg: SigAlg, public: &[u8]) -> Result<Box<dyn Verifier>, BackendError> {
            backends::openssl::OpenSsl.verifier(alg, public)
        }
        fn agreement(&self, alg: KxAlg, ours: Option<&keys::KeyPair>) -> Result<Box<dyn Agreement>, BackendError> {
            Ok(Box::new(LyingAgreement(backends::openssl::OpenSsl.agreement(alg, ours)?, self.keep)))
        }
        fn owned(&self) -> Option<Box<dyn Backend>> {
            Some(Box::new(*self))
        }
    }
}
