"""Operation names as people spell them, and sizes with suffixes (cryptoperf.opnames)."""

import pytest

from conftest import WORKER_HELLO
from cryptoperf.opnames import (ALIASES, canonical_name, canonical_op, parse_size, suggest_ops,
                                unknown_op_hint)

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

KNOWN = tuple(WORKER_HELLO["ops"])


@pytest.mark.parametrize("spelling, canonical", [
    # case and punctuation
    ("sha256", "sha256"), ("SHA256", "sha256"), ("sha-256", "sha256"), ("SHA_256", "sha256"),
    ("sha-1", "sha1"), ("SHA1", "sha1"), ("sha3_256", "sha3-256"), ("SHA3-256", "sha3-256"),
    ("sha-3-256", "sha3-256"), ("sha 384", "sha384"),
    ("rsa-3072-sign", "rsa3072-sign"), ("RSA3072-sign", "rsa3072-sign"), ("RSA_2048_VERIFY", "rsa2048-verify"),
    ("aes128-gcm-seal", "aes-128-gcm-seal"), ("AES-256-GCM-open", "aes-256-gcm-open"),
    ("chacha20poly1305-seal", "chacha20-poly1305-seal"), ("ChaCha20-Poly1305-open", "chacha20-poly1305-open"),
    ("X25519MLKEM768-encaps", "x25519mlkem768-encaps"), ("x25519-mlkem768-keygen", "x25519mlkem768-keygen"),
    ("X25519_MLKEM768_decaps", "x25519mlkem768-decaps"),
    ("mlkem768-encaps", "ml-kem-768-encaps"), ("ML-KEM-768-encaps", "ml-kem-768-encaps"),
    ("MLKEM1024-decaps", "ml-kem-1024-decaps"),
    ("mldsa65-sign", "ml-dsa-65-sign"), ("ML-DSA-44-keygen", "ml-dsa-44-keygen"),
    ("Ed25519-Sign", "ed25519-sign"), ("hmac_sha256", "hmac-sha256"),
    # aliases: SHA-2 names, curve names, AES-GCM word order, AEAD and KEM verbs
    ("SHA2-256", "sha256"), ("sha2-512", "sha512"), ("hmac-sha2-256", "hmac-sha256"),
    ("ecdsa-secp256r1-sign", "ecdsa-p256-sign"), ("ecdsa-prime256v1-verify", "ecdsa-p256-verify"),
    ("ecdsa-p-256-sign", "ecdsa-p256-sign"), ("ECDSA-NIST-P256-sign", "ecdsa-p256-sign"),
    ("ecdsa-secp384r1-sign", "ecdsa-p384-sign"), ("ecdsa-P-384-verify", "ecdsa-p384-verify"),
    ("ecdh-secp256r1-derive", "ecdh-p256-derive"),
    ("aes-gcm-128-seal", "aes-128-gcm-seal"), ("aes-128-gcm-encrypt", "aes-128-gcm-seal"),
    ("aes-256-gcm-decrypt", "aes-256-gcm-open"), ("chachapoly-seal", "chacha20-poly1305-seal"),
    ("ml-kem-768-encap", "ml-kem-768-encaps"), ("ml-kem-512-decapsulate", "ml-kem-512-decaps"),
    # a bare curve names the operations on it; the verb picks one
    ("p256-sign", "ecdsa-p256-sign"), ("secp256r1-verify", "ecdsa-p256-verify"),
    ("prime256v1-sign", "ecdsa-p256-sign"), ("P-256-derive", "ecdh-p256-derive"),
    ("p384-sign", "ecdsa-p384-sign"), ("secp384r1-verify", "ecdsa-p384-verify"),
])
def test_spellings_resolve_to_the_canonical_operation(spelling, canonical):
    assert canonical_op(spelling, KNOWN) == canonical


#: The P-256 key-agreement operations: a key share, the derive, and the derive that validates
#: the peer's key as a real exchange does.
P256_KX = ["ecdh-p256-keygen", "ecdh-p256-derive", "ecdh-p256-derive-validated"]


@pytest.mark.parametrize("name, options", [
    ("aes-128-gcm", ["aes-128-gcm-seal", "aes-128-gcm-open"]),
    ("rsa2048", ["rsa2048-sign", "rsa2048-verify"]),
    ("x25519", ["x25519-keygen", "x25519-derive"]),
    ("ml-kem-768", ["ml-kem-768-keygen", "ml-kem-768-encaps", "ml-kem-768-decaps"]),
    ("ecdsa-p-256", ["ecdsa-p256-sign", "ecdsa-p256-verify"]),
    ("ecdh-p256", ["ecdh-p256-keygen", "ecdh-p256-derive", "ecdh-p256-derive-validated"]),
    ("ffdh2048", ["ffdh-2048-keygen", "ffdh-2048-derive", "ffdh-2048-derive-validated"]),
    ("p256", ["ecdsa-p256-sign", "ecdsa-p256-verify", *P256_KX]),
    ("secp256r1", ["ecdsa-p256-sign", "ecdsa-p256-verify", *P256_KX]),
    ("prime256v1", ["ecdsa-p256-sign", "ecdsa-p256-verify", *P256_KX]),
    ("secp384r1", ["ecdsa-p384-sign", "ecdsa-p384-verify"]),
])
def test_a_name_without_its_verb_is_ambiguous_and_lists_its_operations(name, options):
    assert canonical_op(name, KNOWN) is None
    assert suggest_ops(name, KNOWN) == options
    hint = unknown_op_hint(name, KNOWN)
    assert hint.startswith("; it names several operations: ") and hint.endswith("(give one)")
    for o in options:
        assert f"'{o}'" in hint


def test_sha_256_is_sha256_never_sha3_256():
    """The case that started it: difflib called 'sha-256' closest to 'sha3-256'."""
    for spelling in ("sha-256", "SHA-256", "Sha_256", "sha2-256", "SHA2_256"):
        assert canonical_op(spelling, KNOWN) == "sha256"
        assert suggest_ops(spelling, KNOWN) == ["sha256"]
    assert canonical_op("sha3-256", KNOWN) == "sha3-256"
    # with sha256 missing from the worker, sha-256 is unknown, and sha3-256 is not offered
    without = [o for o in KNOWN if o != "sha256"]
    assert canonical_op("sha-256", without) is None
    assert suggest_ops("sha-256", without) == [] and unknown_op_hint("sha-256", without) == ""


@pytest.mark.parametrize("name", [
    "sha257", "sha-257", "sha224", "sha512-256", "sha3-512", "rsa4097-sign", "rsa1024-sign",
    "ecdsa-p521-sign", "ecdsa-secp521r1-sign", "aes-192-gcm-seal", "ml-kem-769-encaps", "mldsa66-sign",
    "kyber768-encaps", "dilithium3-sign", "hmac-sha1", "hmac", "rsa", "sha", "chacha20-seal",
    "x448-derive", "bogus",
])
def test_unknown_names_get_no_suggestion_of_another_algorithm(name):
    """Nothing across hash functions, key sizes, curves or algorithms: no guess at all."""
    assert canonical_op(name, KNOWN) is None
    assert suggest_ops(name, KNOWN) == []
    assert unknown_op_hint(name, KNOWN) == ""


@pytest.mark.parametrize("name, suggestion", [
    ("rsa2048-sgin", "rsa2048-sign"), ("ecdsa-p256-sing", "ecdsa-p256-sign"),
    ("aes-128-gcm-seel", "aes-128-gcm-seal"), ("ml-kem-768-encpas", "ml-kem-768-encaps"),
    ("SHA256-sign", "sha256"),
])
def test_a_mistyped_verb_suggests_the_same_algorithm(name, suggestion):
    assert canonical_op(name, KNOWN) is None
    assert unknown_op_hint(name, KNOWN) == f"; did you mean '{suggestion}'?"


def test_another_verb_of_the_same_algorithm_is_offered():
    assert suggest_ops("x25519-sign", KNOWN) == ["x25519-keygen", "x25519-derive"]
    assert unknown_op_hint("x25519-sign", KNOWN).startswith("; did you mean one of 'x25519-keygen'")


def test_no_two_known_operations_collide():
    """Every worker operation stays reachable by its own name and by its squashed spelling."""
    for op in KNOWN:
        assert canonical_op(op, KNOWN) == op
        assert canonical_op(op.upper().replace("-", "_"), KNOWN) == op


def test_the_alias_table_is_documented():
    for pattern, replacement, meaning in ALIASES:
        assert pattern and meaning and "=" in meaning


def test_canonical_name_for_backends():
    backends = ("openssl", "aws-lc", "ring", "rustcrypto")
    assert canonical_name("AWS-LC", backends) == "aws-lc"
    assert canonical_name("aws_lc", backends) == "aws-lc"
    assert canonical_name("OpenSSL", backends) == "openssl"
    assert canonical_name("boringssl", backends) is None


# --------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("text, size", [
    ("4096", 4096), (4096, 4096), ("16k", 16384), ("16K", 16384), ("16KiB", 16384), ("16kib", 16384),
    ("16 KiB", 16384), ("4 KiB", 4096), ("1M", 1 << 20), ("1m", 1 << 20), ("1MiB", 1 << 20),
    ("64MiB", 64 << 20), ("1G", 1 << 30), ("1GiB", 1 << 30), ("512B", 512), ("512 b", 512),
    (" 32 ", 32), ("1_048_576", 1 << 20), ("1.5k", 1536), ("0.5KiB", 512), ("0", 0),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, fragment", [
    ("16KB", "ambiguous"), ("16kB", "ambiguous"), ("1MB", "write 1M or 1MiB"), ("2GB", "ambiguous"),
    ("16x", "unknown unit 'x'"), ("k", "not a size"), ("", "not a size"), ("-1", "not a size"),
    (-1, "not negative"), ("1.3k", "not a whole number of bytes"), ("1e3", "not a size"),
    (True, "not a size"), ("sixteen", "not a size"), ("16 K iB", "not a size"),
])
def test_parse_size_refuses(text, fragment):
    with pytest.raises(ValueError) as e:
        parse_size(text)
    assert fragment in str(e.value)
    assert "1024" in str(e.value) or "whole number" in str(e.value) or "negative" in str(e.value)


def test_a_missing_verb_completes_when_one_known_operation_fits():
    # (the real worker has none left: every key agreement now has its keygen beside its derive)
    assert canonical_op("ecdh-p256", ["ecdh-p256-derive", "sha256"]) == "ecdh-p256-derive"
    assert canonical_op("ffdh2048", ["ffdh-2048-derive", "ffdh-2048-derive-validated"]) is None
