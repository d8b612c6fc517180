package main

// Known answers of the signature operations, run through the very calls the timed cases make
// (rsaSign/rsaVerify, ecdsaSign/ecdsaVerify, ed25519): a published vector on its own key, and
// the Rust worker's signature of "abc" under the fixed key for the case's digest and padding.
// Randomised schemes (RSA-PSS, ECDSA) have no fixed output to reproduce: their signing side is
// checked by verifying its own signature, and the cross-check has OpenSSL verify it.

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"fmt"
)

// acceptsAndRejects is nil when verify accepts sig on msg and refuses it with a bit flipped.
func acceptsAndRejects(what string, verify func(msg, sig []byte) error, msg, sig []byte) error {
	if sig == nil {
		return fmt.Errorf("%s: no vector", what)
	}
	if err := verify(msg, sig); err != nil {
		return fmt.Errorf("%s: the known signature is refused: %w", what, err)
	}
	if verify(msg, flipped(sig)) == nil {
		return fmt.Errorf("%s: the known signature with a bit flipped is accepted", what)
	}
	return nil
}

// rsaKAT is the known-answer test of rsa<bits>-sign (sign) or -verify: Wycheproof's first valid
// SHA-256 vector of the key size and padding (vectors/wycheproof-rsa.txt, on Wycheproof's key),
// then the computed signature of "abc" under the fixed key with the case's digest and padding —
// reproduced byte for byte by a PKCS#1 v1.5 signer (deterministic), verified otherwise.
func rsaKAT(bits int, sign bool) func(Params) KAT {
	return func(p Params) KAT {
		pss, field := p.Padding == "pss", fmt.Sprintf("rsa%d_%s_", bits, p.Padding)
		file := fmt.Sprintf("rsa_signature_%d_sha256_test.json tcId 2 (PKCS#1 v1.5, SHA-256)", bits)
		if pss {
			file = fmt.Sprintf("rsa_pss_%d_sha256_mgf1_32_test.json tcId 2 (PSS, SHA-256, salt 32)", bits)
		}
		source := fmt.Sprintf("Wycheproof testvectors_v1/%s; and %s (%s, %s)", file, computedABCSource, p.Digest, p.Padding)
		return KAT{Source: source, Check: func() error {
			pub, err := x509.ParsePKCS1PublicKey(vectorField("wycheproof-rsa.txt", field+"pub"))
			if err != nil {
				return err
			}
			if err := acceptsAndRejects("Wycheproof vector", func(m, s []byte) error { return rsaVerify(pub, "sha256", pss, m, s) },
				vectorField("wycheproof-rsa.txt", field+"msg"), vectorField("wycheproof-rsa.txt", field+"sig")); err != nil {
				return err
			}
			key, _, err := fixedRSAKey(bits)
			if err != nil {
				return err
			}
			verify := func(m, s []byte) error { return rsaVerify(&key.PublicKey, p.Digest, pss, m, s) }
			want := computedABC(fmt.Sprintf("rsa%d", bits), p.Padding, p.Digest)
			if err := acceptsAndRejects("computed \"abc\" vector", verify, []byte("abc"), want); err != nil || !sign {
				return err
			}
			got, err := rsaSign(key, p.Digest, pss, []byte("abc"))
			if err != nil {
				return err
			}
			if pss {
				return acceptsAndRejects("own PSS signature of \"abc\"", verify, []byte("abc"), got)
			}
			return same("PKCS#1 v1.5 signature of \"abc\"", got, want)
		}}
	}
}

// rfc6979 is RFC 6979 Appendix A.2.5 (P-256, SHA-256) or A.2.6 (P-384, SHA-384), message
// "sample": the private key x, the public key U (SEC1 uncompressed) and the signature (r, s)
// DER-encoded as the Rust worker's worker/src/kat/vectors.rs has it.
var rfc6979 = map[int]struct{ section, digest, x, u, sig string }{
	256: {"A.2.5", "sha256", "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721",
		"0460fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6" +
			"7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299",
		"3046022100efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716" +
			"022100f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8"},
	384: {"A.2.6", "sha384", "6b9d3dad2e1b8c1c05b19875b6659f4de23c3b667bf297ba9aa47740787137d896d5724e4c70a825f872c9ea60d2edf5",
		"04ec3a4e415b4e19a4568618029f427fa5da9a8bc4ae92e02e06aae5286b300c64def8f0ea9055866064a254515480bc13" +
			"8015d9b72d7d57244ea8ef9ac0c621896708a59367f9dfb9f54ca84b3f1c9db1288b231c3ae0d4fe7344fd2533264720",
		"306602310094edbb92a5ecb8aad4736e56c691916b3f88140666ce9fa73d64c4ea95ad133c81a648152e44acf96e36dd1e80fabe46" +
			"02310099ef4aeb15f178cea1fe40db2603138f130e740a19624526203b6351d0a3a94fa329c145786e679e7b82c71a38628ac8"},
}

// ecdsaKAT is the known-answer test of ecdsa-p<bits>-sign (sign) or -verify: RFC 6979's key
// pair (x gives U) and signature of "sample" on its own digest, then the computed signature of
// "abc" under the fixed key with the case's digest; a signer's own signatures must verify.
func ecdsaKAT(bits int, sign bool) func(Params) KAT {
	return func(p Params) KAT {
		v := rfc6979[bits]
		curve := map[int]elliptic.Curve{256: elliptic.P256(), 384: elliptic.P384()}[bits]
		source := fmt.Sprintf("RFC 6979 §%s (P-%d, %s, \"sample\"); and %s (%s)", v.section, bits, v.digest, computedABCSource, p.Digest)
		return KAT{Source: source, Check: func() error {
			priv, err := ecdsa.ParseRawPrivateKey(curve, unhex(v.x))
			if err != nil {
				return err
			}
			if u, err := priv.PublicKey.Bytes(); err != nil || same("RFC 6979 public key", u, unhex(v.u)) != nil {
				return fmt.Errorf("the RFC 6979 private key does not give its public key (%v)", err)
			}
			rfcVerify := func(m, s []byte) error { return ecdsaVerify(&priv.PublicKey, v.digest, m, s) }
			if err := acceptsAndRejects("RFC 6979 signature", rfcVerify, []byte("sample"), unhex(v.sig)); err != nil {
				return err
			}
			key, _, err := fixedECKey(fmt.Sprintf("ecdsa-p%d", bits))
			if err != nil {
				return err
			}
			verify := func(m, s []byte) error { return ecdsaVerify(&key.PublicKey, p.Digest, m, s) }
			want := computedABC(fmt.Sprintf("ecdsa-p%d", bits), "-", p.Digest)
			if err := acceptsAndRejects("computed \"abc\" vector", verify, []byte("abc"), want); err != nil || !sign {
				return err
			}
			for _, k := range []struct {
				key    *ecdsa.PrivateKey
				digest string
			}{{priv, v.digest}, {key, p.Digest}} {
				sig, err := ecdsaSign(k.key, k.digest, []byte("sample"))
				if err != nil {
					return err
				}
				if err := acceptsAndRejects("own signature", func(m, s []byte) error { return ecdsaVerify(&k.key.PublicKey, k.digest, m, s) },
					[]byte("sample"), sig); err != nil {
					return err
				}
			}
			return nil
		}}
	}
}

// RFC 8032 §7.1, TEST 1 (the empty message), whose secret key is the fixed Ed25519 key: the
// public key, and the signature — reproduced (Ed25519 is deterministic) or verified.
const ed25519Test1Pub, ed25519Test1Sig = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
	"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"

var katEd25519Sign = KAT{Source: "RFC 8032 §7.1 TEST 1", Check: func() error {
	priv := ed25519.NewKeyFromSeed(ed25519Seed)
	if err := same("Ed25519 public key", priv.Public().(ed25519.PublicKey), unhex(ed25519Test1Pub)); err != nil {
		return err
	}
	return same("Ed25519 signature", ed25519.Sign(priv, nil), unhex(ed25519Test1Sig))
}}

var katEd25519Verify = KAT{Source: "RFC 8032 §7.1 TEST 1", Check: func() error {
	return acceptsAndRejects("RFC 8032 TEST 1", func(m, s []byte) error { return ed25519Verify(unhex(ed25519Test1Pub), m, s) },
		[]byte{}, unhex(ed25519Test1Sig))
}}
