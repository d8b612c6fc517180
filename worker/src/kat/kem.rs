//! Known answers of the KEMs (ML-KEM, FIPS 203, on NIST ACVP test cases; X25519MLKEM768 on the
//! ML-KEM-768 case joined with RFC 7748's keys), for [`super::known_answer`].

use super::{independent, length, same, sha256, tampered, unhex, vectors, Check};
use crate::backends::{hybrid, Backend, BackendError};
use crate::ops::keys;
use crate::ops::{KemAlg, KxAlg, Op};

/// A key pair from the backend's random key generation (the timed path of `-keygen`, and
/// the key every encaps/decaps case uses): FIPS 203 sizes, it decapsulates what an independent
/// implementation (another backend where one has the algorithm) encapsulates to it, and two
/// generated keys differ.
pub(super) fn generated_kem_check(backend: &dyn Backend, alg: KemAlg) -> Result<Check, BackendError> {
    let (ek_len, ct_len, ss_len) = alg.lens();
    let mut kp = backend.kem_keypair(alg)?;
    let ek = kp.encapsulation_key();
    let other_ek = backend.kem_keypair(alg)?.encapsulation_key();
    let (_, mut enc) = independent(backend, |b| b.kem_encapsulator(alg, &ek))?;
    Ok((|| {
        length("encapsulation key", ek.len(), ek_len)?;
        if ek == other_ek {
            return Err("two generated key pairs are the same".into());
        }
        let (ct, ss) = enc.encaps().map_err(|e| e.to_string())?;
        length("ciphertext", ct.len(), ct_len)?;
        length("shared secret", ss.len(), ss_len)?;
        same("decapsulated secret", &kp.decaps(&ct).map_err(|e| e.to_string())?, &ss)?;
        // Implicit rejection (FIPS 203 §6.3): a tampered ciphertext yields another secret.
        match kp.decaps(&tampered(&ct)) {
            Ok(k) if k == ss => Err("a tampered ciphertext gave the same secret".into()),
            _ => Ok(()),
        }
    })())
}

/// `c` with its first byte XOR 0x01 (the tampered ciphertext of the `k_rejected` vectors).
fn first_byte_flipped(c: &[u8]) -> Vec<u8> {
    let mut t = c.to_vec();
    t[0] ^= 1;
    t
}

pub(super) fn kem_kat(backend: &dyn Backend, op: Op, alg: KemAlg) -> Result<(String, Check), BackendError> {
    if alg == KemAlg::X25519MlKem768 {
        return hybrid_kat(backend, op);
    }
    let v = vectors::ml_kem(alg);
    let ek = v.ek(alg.rank());
    Ok(match op {
        Op::Decaps(_) => {
            let mut dk = backend.kem_decapsulator(alg, &v.dk)?;
            let check = (|| {
                same("encapsulation key inside dk", &dk.encapsulation_key(), ek)?;
                same("shared key of the ACVP ciphertext", &dk.decaps(&v.c).map_err(|e| e.to_string())?, &v.k)?;
                let rejected = dk.decaps(&first_byte_flipped(&v.c)).map_err(|e| e.to_string())?;
                same("implicit-rejection key of the tampered ciphertext", &rejected, &v.k_rejected)
            })()
            .and(generated_kem_check(backend, alg)?);
            (format!("{} (decapsulation and implicit rejection)", v.source), check)
        }
        Op::Encaps(_) => {
            let mut enc = backend.kem_encapsulator(alg, ek)?;
            match enc.encaps_with(&v.m) {
                Ok((ct, ss)) => (
                    format!("{} (encapsulation with the test case's m)", v.source),
                    same("ciphertext", &ct, &v.c).and(same("shared key", &ss, &v.k)),
                ),
                Err(BackendError::Unsupported(why)) => {
                    // No m: the randomised encapsulation to the ACVP key must decapsulate, with
                    // the ACVP decapsulation key, to the secret it returned.
                    let (by, mut dk) = independent(backend, |b| b.kem_decapsulator(alg, &v.dk))?;
                    let check = (|| {
                        let (ct, ss) = enc.encaps().map_err(|e| e.to_string())?;
                        length("ciphertext", ct.len(), alg.lens().1)?;
                        same("secret decapsulated with the ACVP key", &dk.decaps(&ct).map_err(|e| e.to_string())?, &ss)
                    })();
                    (
                        format!(
                            "{}: encapsulation to the test case's ek, decapsulated with its dk by \
                             the {by} backend ({why})",
                            v.source
                        ),
                        check,
                    )
                }
                Err(e) => return Err(e),
            }
        }
        _ => {
            // Key generation. Seeded where the library allows it, and always the random
            // generation that is timed.
            let generated = generated_kem_check(backend, alg)?;
            match backend.kem_keypair_from_seed(alg, &v.keygen_d, &v.keygen_z) {
                Ok(kp) => {
                    let check = (|| {
                        same("SHA-256 of ek", &sha256(&kp.encapsulation_key()), &v.keygen_ek_sha256)?;
                        let dk = kp.decapsulation_key().map_err(|e| e.to_string())?;
                        same("SHA-256 of dk", &sha256(&dk), &v.keygen_dk_sha256)
                    })()
                    .and(generated);
                    (
                        format!(
                            "{} (key generation from the seeds d, z; and a randomly generated key \
                             pair round-trips)",
                            v.source
                        ),
                        check,
                    )
                }
                Err(BackendError::Unsupported(why)) => (
                    format!(
                        "consistency check, not a known answer ({why}): a generated key pair has \
                         FIPS 203 sizes, decapsulates another library's encapsulations to it, \
                         rejects implicitly, and differs from the next"
                    ),
                    generated,
                ),
                Err(e) => return Err(e),
            }
        }
    })
}

/// X25519MLKEM768 on the ML-KEM-768 ACVP test case joined with RFC 7748 §6.1's keys: the
/// client is (ACVP dk, Alice), the server (Bob), so the client's share is `ek || Alice's
/// public key`, the server's `c || Bob's public key`, and the secret `k || K`.
fn hybrid_kat(backend: &dyn Backend, op: Op) -> Result<(String, Check), BackendError> {
    // Say what is missing before anything else fails for lack of it.
    if let Some(missing) = [
        backend.kem_keypair(KemAlg::MlKem768).err(),
        backend.agreement(KxAlg::X25519, None).err(),
    ]
    .into_iter()
    .flatten()
    .next()
    {
        return Err(match missing {
            BackendError::Unsupported(why) => {
                BackendError::Unsupported(format!("no X25519MLKEM768 without its parts: {why}"))
            }
            e => e,
        });
    }
    let v = vectors::ml_kem(KemAlg::MlKem768);
    let ek = v.ek(3);
    let client_share = [ek, keys::X25519_ALICE.public].concat();
    let server_share = [v.c.as_slice(), keys::X25519_BOB.public].concat();
    let secret = [v.k.clone(), unhex(vectors::X25519_SHARED)].concat();
    let source = format!(
        "{} joined with RFC 7748 §6.1 (client: the ACVP key and Alice; server: Bob)",
        v.source
    );
    Ok(match op {
        Op::Decaps(_) => {
            let mut client = hybrid::decapsulator_from_parts(
                backend.kem_decapsulator(KemAlg::MlKem768, &v.dk)?,
                backend.agreement(KxAlg::X25519, Some(&keys::X25519_ALICE))?,
            );
            let check = same("client share", &client.encapsulation_key(), &client_share).and_then(|()| {
                same("secret", &client.decaps(&server_share).map_err(|e| e.to_string())?, &secret)
            });
            (source, check.and(generated_kem_check(backend, KemAlg::X25519MlKem768)?))
        }
        Op::Encaps(_) => {
            let bob = backend.agreement(KxAlg::X25519, Some(&keys::X25519_BOB))?;
            let mut server = hybrid::encapsulator_with(backend, &client_share, bob)?;
            match server.encaps_with(&v.m) {
                Ok((share, ss)) => (
                    format!("{source}, encapsulation with the test case's m"),
                    same("server share", &share, &server_share).and(same("secret", &ss, &secret)),
                ),
                Err(BackendError::Unsupported(why)) => {
                    let (by, mut dk) = independent(backend, |b| b.kem_decapsulator(KemAlg::MlKem768, &v.dk))?;
                    let check = (|| {
                        let (share, ss) = server.encaps().map_err(|e| e.to_string())?;
                        length("server share", share.len(), 1120)?;
                        same("server's X25519 public key", &share[1088..], keys::X25519_BOB.public)?;
                        same("X25519 half of the secret", &ss[32..], &unhex(vectors::X25519_SHARED))?;
                        let mlkem = dk.decaps(&share[..1088]).map_err(|e| e.to_string())?;
                        same("ML-KEM half of the secret, decapsulated with the ACVP key", &mlkem, &ss[..32])
                    })();
                    (format!("{source}; ML-KEM half decapsulated by the {by} backend ({why})"), check)
                }
                Err(e) => return Err(e),
            }
        }
        _ => (
            "consistency check, not a known answer (the halves' key generation is checked by \
             ml-kem-768-keygen and x25519-keygen): a generated client share is ek || X25519 \
             public key, and another library's server share for it decapsulates to the same \
             64-byte secret"
                .into(),
            generated_kem_check(backend, KemAlg::X25519MlKem768)?,
        ),
    })
}
