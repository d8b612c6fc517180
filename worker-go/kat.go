package main

// Known-answer tests: each operation's published test vector, run through the same standard
// library calls the timed case makes, before anything is timed. A wrong answer makes the case
// "invalid" and it is never timed.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"

	"golang.org/x/crypto/chacha20poly1305"
)

// KAT is one operation's known-answer test: Source names the document and test case, Check
// runs it (nil: the answer matched).
type KAT struct {
	Source string
	Check  func() error
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func same(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: got %x, want %x", what, got, want)
	}
	return nil
}

// randReader is where keys for timed cases come from (the system's random source).
func randReader() io.Reader { return rand.Reader }

func digestKAT(source string, sum func([]byte) []byte, msg, want string) KAT {
	return KAT{Source: source, Check: func() error { return same("digest", sum([]byte(msg)), unhex(want)) }}
}

// FIPS 180-4 and FIPS 202 examples ("abc"), NIST CSRC "Cryptographic Standards and Guidelines:
// Examples with Intermediate Values" (SHA-256, SHA-384, SHA-512, SHA3-256).
var (
	katSHA256 = digestKAT("FIPS 180-4 example SHA-256 (\"abc\"), NIST CSRC examples",
		func(m []byte) []byte { s := sha256.Sum256(m); return s[:] }, "abc",
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
	katSHA384 = digestKAT("FIPS 180-4 example SHA-384 (\"abc\"), NIST CSRC examples",
		func(m []byte) []byte { s := sha512.Sum384(m); return s[:] }, "abc",
		"cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7")
	katSHA512 = digestKAT("FIPS 180-4 example SHA-512 (\"abc\"), NIST CSRC examples",
		func(m []byte) []byte { s := sha512.Sum512(m); return s[:] }, "abc",
		"ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
	katSHA3256 = digestKAT("FIPS 202 example SHA3-256 (\"abc\"), NIST CSRC examples",
		func(m []byte) []byte { s := sha3.Sum256(m); return s[:] }, "abc",
		"3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532")
)

// RFC 4231 §4.3, test case 2 (HMAC-SHA-256).
var katHMACSHA256 = KAT{Source: "RFC 4231 §4.3 test case 2", Check: func() error {
	mac := hmac.New(sha256.New, []byte("Jefe"))
	mac.Write([]byte("what do ya want for nothing?"))
	return same("HMAC-SHA-256", mac.Sum(nil), unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
}}

func gcmKAT(source string, keyBytes int, ciphertext, tag string) KAT {
	return KAT{Source: source, Check: func() error {
		block, err := aes.NewCipher(make([]byte, keyBytes))
		if err != nil {
			return err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return err
		}
		want := append(unhex(ciphertext), unhex(tag)...)
		sealed := aead.Seal(nil, make([]byte, 12), make([]byte, 16), nil)
		if err := same("AES-GCM seal", sealed, want); err != nil {
			return err
		}
		opened, err := aead.Open(nil, make([]byte, 12), want, nil)
		if err != nil {
			return fmt.Errorf("AES-GCM open of the known ciphertext: %w", err)
		}
		return same("AES-GCM open", opened, make([]byte, 16))
	}}
}

// McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)", test cases 2 (AES-128) and
// 14 (AES-256): zero key, zero 96-bit IV, one zero block.
var (
	katAES128GCM = gcmKAT("McGrew & Viega, The Galois/Counter Mode of Operation (GCM), test case 2", 16,
		"0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bddf")
	katAES256GCM = gcmKAT("McGrew & Viega, The Galois/Counter Mode of Operation (GCM), test case 14", 32,
		"cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919")
)

// RFC 7748 §5.2, the first X25519 test vector.
var katX25519 = KAT{Source: "RFC 7748 §5.2 first test vector", Check: func() error {
	priv, err := ecdh.X25519().NewPrivateKey(unhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"))
	if err != nil {
		return err
	}
	pub, err := ecdh.X25519().NewPublicKey(unhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"))
	if err != nil {
		return err
	}
	got, err := priv.ECDH(pub)
	if err != nil {
		return err
	}
	return same("X25519", got, unhex("c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"))
}}

// RFC 8032 §7.1, TEST 1 (the empty message).
var katEd25519 = KAT{Source: "RFC 8032 §7.1 TEST 1", Check: func() error {
	priv := ed25519.NewKeyFromSeed(unhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
	if err := same("Ed25519 public key", priv.Public().(ed25519.PublicKey),
		unhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")); err != nil {
		return err
	}
	return same("Ed25519 signature", ed25519.Sign(priv, nil), unhex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"))
}}

// RFC 6979 §A.2.5, ECDSA P-256 with SHA-256, message "sample": the key pair, and the
// signature (r, s) verified. Go's ECDSA signatures are randomised (hedged), so the signing
// side is checked by verifying its own signature with the known public key.
var katECDSAP256 = KAT{Source: "RFC 6979 §A.2.5 (P-256, SHA-256, \"sample\")", Check: func() error {
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), unhex("c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721"))
	if err != nil {
		return err
	}
	pub, err := priv.PublicKey.Bytes()
	if err != nil {
		return err
	}
	if err := same("P-256 public key", pub, unhex("04"+
		"60fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6"+
		"7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299")); err != nil {
		return err
	}
	digest := sha256.Sum256([]byte("sample"))
	r := new(big.Int).SetBytes(unhex("efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716"))
	s := new(big.Int).SetBytes(unhex("f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8"))
	if !ecdsa.Verify(&priv.PublicKey, digest[:], r, s) {
		return fmt.Errorf("the RFC 6979 signature does not verify")
	}
	sig, err := ecdsa.SignASN1(rand.Reader, priv, digest[:])
	if err != nil {
		return err
	}
	if !ecdsa.VerifyASN1(&priv.PublicKey, digest[:], sig) {
		return fmt.Errorf("a signature made with the known key does not verify")
	}
	return nil
}}

// RFC 8439 §2.8.2, the AEAD_CHACHA20_POLY1305 example: the first 16 bytes of the ciphertext and
// the tag (which covers the whole ciphertext and the AAD).
var katChaCha20Poly1305 = KAT{Source: "RFC 8439 §2.8.2 (AEAD_CHACHA20_POLY1305 example)", Check: func() error {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(0x80 + i)
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return err
	}
	nonce, aad := unhex("070000004041424344454647"), unhex("50515253c0c1c2c3c4c5c6c7")
	msg := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	sealed := aead.Seal(nil, nonce, msg, aad)
	if err := same("ChaCha20-Poly1305 ciphertext (first 16 bytes)", sealed[:16], unhex("d31a8d34648e60db7b86afbc53ef7ec2")); err != nil {
		return err
	}
	if err := same("ChaCha20-Poly1305 tag", sealed[len(sealed)-16:], unhex("1ae10b594f09e26a7e902ecbd0600691")); err != nil {
		return err
	}
	opened, err := aead.Open(nil, nonce, sealed, aad)
	if err != nil {
		return fmt.Errorf("ChaCha20-Poly1305 open of its own ciphertext: %w", err)
	}
	return same("ChaCha20-Poly1305 open", opened, msg)
}}
