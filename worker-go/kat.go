package main

// Known-answer tests: each operation's published test vector, run through the same standard
// library calls the timed case makes, before anything is timed. A wrong answer makes the case
// "invalid" and it is never timed. This file: hashes, HMAC and AEADs; kat_sign.go, kat_kex.go
// and kat_kem.go the others.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/fips140"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

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

// katOutsideEnforcement runs f with Go's FIPS 140-only enforcement lifted (a no-op when it is
// not enforced), for the known-answer steps whose entry point the enforced module refuses as a
// service while the arithmetic is the approved one: a caller-chosen GCM nonce reproducing a
// published vector, derandomized ML-KEM encapsulation (crypto/mlkem/mlkemtest). Nothing timed
// and no cross-check runs this way.
func katOutsideEnforcement(f func()) {
	if fips140.Enforced() {
		fips140.WithoutEnforcement(f)
		return
	}
	f()
}

// digestKAT checks the digest `op` of msg through digestInto, the timed call.
func digestKAT(source, op string, msg, want string) KAT {
	return KAT{Source: source, Check: func() error {
		got, err := digestInto(op, digestAlgs[op].new(), []byte(msg), nil)
		if err != nil {
			return err
		}
		return same("digest", got, unhex(want))
	}}
}

// FIPS 180-4 and FIPS 202 examples ("abc"), NIST CSRC "Cryptographic Standards and Guidelines:
// Examples with Intermediate Values" (SHA-1, SHA-256, SHA-384, SHA-512, SHA3-256).
var (
	katSHA1 = digestKAT("FIPS 180-4 example SHA-1 (\"abc\"), NIST CSRC examples", "sha1", "abc",
		"a9993e364706816aba3e25717850c26c9cd0d89d")
	katSHA256 = digestKAT("FIPS 180-4 example SHA-256 (\"abc\"), NIST CSRC examples", "sha256", "abc",
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
	katSHA384 = digestKAT("FIPS 180-4 example SHA-384 (\"abc\"), NIST CSRC examples", "sha384", "abc",
		"cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7")
	katSHA512 = digestKAT("FIPS 180-4 example SHA-512 (\"abc\"), NIST CSRC examples", "sha512", "abc",
		"ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
	katSHA3256 = digestKAT("FIPS 202 example SHA3-256 (\"abc\"), NIST CSRC examples", "sha3-256", "abc",
		"3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532")
)

// RFC 4231 §4.2 and §4.7, test cases 1 and 6 (HMAC-SHA-256), through macInto, the timed call:
// keys of 20 and 131 bytes (test case 2's 4-byte key is one the enforced FIPS module refuses,
// under 112 bits).
var katHMACSHA256 = KAT{Source: "RFC 4231 §4.2 and §4.7, test cases 1 and 6", Check: func() error {
	for _, v := range []struct {
		key  []byte
		data string
		tag  string
	}{
		{bytes.Repeat([]byte{0x0b}, 20), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
		{bytes.Repeat([]byte{0xaa}, 131), "Test Using Larger Than Block-Size Key - Hash Key First",
			"60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
	} {
		got, err := macInto(hmac.New(sha256.New, v.key), []byte(v.data), nil)
		if err != nil {
			return err
		}
		if err := same("HMAC-SHA-256", got, unhex(v.tag)); err != nil {
			return err
		}
	}
	return nil
}}

// gcmKAT checks AES-GCM with the vector of a zero key, a zero 96-bit nonce and one zero block:
// the timed API (cipher.NewGCMWithRandomNonce, which reads the nonce from the front of what it
// opens) opens nonce || ciphertext || tag to the zero block, refuses it with the tag flipped,
// and opens its own seal of the block; the vector's seal is reproduced with the caller-chosen
// nonce through cipher.NewGCM (katOutsideEnforcement: the enforced module refuses such
// nonces as a service; the GCM code is the same).
func gcmKAT(source string, keyBytes int, ciphertext, tag string) KAT {
	return KAT{Source: source, Check: func() error {
		key, block, nonce := make([]byte, keyBytes), make([]byte, 16), make([]byte, 12)
		aead, err := gcmRandomNonce(key)
		if err != nil {
			return err
		}
		want := append(unhex(ciphertext), unhex(tag)...)
		opened, err := aead.Open(nil, nil, append(nonce, want...), nil)
		if err != nil {
			return fmt.Errorf("AES-GCM open of the known ciphertext: %w", err)
		}
		if err := same("AES-GCM open", opened, block); err != nil {
			return err
		}
		if _, err := aead.Open(nil, nil, append(nonce, flipped(want)...), nil); err == nil {
			return fmt.Errorf("AES-GCM opens the known ciphertext with its tag flipped")
		}
		if opened, err = aead.Open(nil, nil, aead.Seal(nil, nil, block, nil), nil); err != nil {
			return fmt.Errorf("AES-GCM open of its own seal: %w", err)
		}
		if err := same("AES-GCM open of its own seal", opened, block); err != nil {
			return err
		}
		var sealed []byte
		katOutsideEnforcement(func() {
			var fixed cipher.AEAD
			var c cipher.Block
			if c, err = aes.NewCipher(key); err == nil {
				if fixed, err = cipher.NewGCM(c); err == nil {
					sealed = fixed.Seal(nil, nonce, block, nil)
				}
			}
		})
		if err != nil {
			return err
		}
		return same("AES-GCM seal with the vector's nonce", sealed, want)
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
