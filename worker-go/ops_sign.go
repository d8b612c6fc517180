package main

// Signatures: rsa2048/3072/4096, ecdsa-p256/p384 and ed25519, sign and verify, on the Rust
// worker's fixed keys (keys/, so a signature made by one worker verifies under the other). One
// operation hashes a message of size_bytes (default 32) with `digest` and signs it, or verifies
// a signature made before timing; RSA takes `padding` (pkcs1, or pss: MGF1 with the same digest,
// a salt of the digest's length). Ed25519 hashes the message itself (no digest parameter).

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
)

// signer is a signature scheme on one key: sign and verify a message (hashed inside, as the
// scheme says), and what OpenSSL needs to do the same — the key as PKCS#8 and as
// SubjectPublicKeyInfo DER, its name of the digest ("" for Ed25519) and whether it is PSS.
type signer struct {
	sign        func(msg []byte) ([]byte, error)
	verify      func(msg, sig []byte) error
	pkcs8, spki []byte
	md          string
	pss         bool
}

var errBadSignature = errors.New("the signature does not verify")

// cryptoHash maps a digest to crypto.Hash, for RSA.
var cryptoHash = map[string]crypto.Hash{"sha1": crypto.SHA1, "sha256": crypto.SHA256, "sha384": crypto.SHA384,
	"sha512": crypto.SHA512, "sha3-256": crypto.SHA3_256}

// rsaSign and rsaVerify are the RSA calls of the timed cases and of their known-answer tests.
func rsaSign(key *rsa.PrivateKey, digest string, pss bool, msg []byte) ([]byte, error) {
	h, err := hashMsg(digestAlgs[digest], msg)
	if err != nil {
		return nil, err
	}
	if pss {
		return rsa.SignPSS(rand.Reader, key, cryptoHash[digest], h, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	}
	return rsa.SignPKCS1v15(rand.Reader, key, cryptoHash[digest], h)
}

func rsaVerify(pub *rsa.PublicKey, digest string, pss bool, msg, sig []byte) error {
	h, err := hashMsg(digestAlgs[digest], msg)
	if err != nil {
		return err
	}
	if pss {
		return rsa.VerifyPSS(pub, cryptoHash[digest], h, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	}
	return rsa.VerifyPKCS1v15(pub, cryptoHash[digest], h, sig)
}

func rsaSigner(bits int) func(Params) (signer, error) {
	return func(p Params) (signer, error) {
		key, der, err := fixedRSAKey(bits)
		if err != nil {
			return signer{}, err
		}
		spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		pss := p.Padding == "pss"
		return signer{pkcs8: der, spki: spki, md: digestAlgs[p.Digest].ssl, pss: pss,
			sign:   func(msg []byte) ([]byte, error) { return rsaSign(key, p.Digest, pss, msg) },
			verify: func(msg, sig []byte) error { return rsaVerify(&key.PublicKey, p.Digest, pss, msg, sig) },
		}, err
	}
}

// ecdsaSign and ecdsaVerify are the ECDSA calls of the timed cases and of their known-answer
// tests: the message hashed with `digest`, the signature DER (ASN.1 Ecdsa-Sig-Value).
func ecdsaSign(key *ecdsa.PrivateKey, digest string, msg []byte) ([]byte, error) {
	h, err := hashMsg(digestAlgs[digest], msg)
	if err != nil {
		return nil, err
	}
	return ecdsa.SignASN1(rand.Reader, key, h)
}

func ecdsaVerify(pub *ecdsa.PublicKey, digest string, msg, sig []byte) error {
	h, err := hashMsg(digestAlgs[digest], msg)
	if err != nil {
		return err
	}
	if !ecdsa.VerifyASN1(pub, h, sig) {
		return errBadSignature
	}
	return nil
}

func ecdsaSigner(keyName string) func(Params) (signer, error) {
	return func(p Params) (signer, error) {
		key, der, err := fixedECKey(keyName)
		if err != nil {
			return signer{}, err
		}
		spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		return signer{pkcs8: der, spki: spki, md: digestAlgs[p.Digest].ssl,
			sign:   func(msg []byte) ([]byte, error) { return ecdsaSign(key, p.Digest, msg) },
			verify: func(msg, sig []byte) error { return ecdsaVerify(&key.PublicKey, p.Digest, msg, sig) },
		}, err
	}
}

// ed25519Seed is the fixed Ed25519 key: RFC 8032 §7.1 TEST 1's secret key, as the Rust worker's.
var ed25519Seed = unhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")

func ed25519Verify(pub ed25519.PublicKey, msg, sig []byte) error {
	if !ed25519.Verify(pub, msg, sig) {
		return errBadSignature
	}
	return nil
}

func ed25519Signer(Params) (signer, error) {
	key := ed25519.NewKeyFromSeed(ed25519Seed)
	pub := key.Public().(ed25519.PublicKey)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return signer{}, err
	}
	spki, err := x509.MarshalPKIXPublicKey(pub)
	return signer{pkcs8: der, spki: spki,
		sign:   func(msg []byte) ([]byte, error) { return ed25519.Sign(key, msg), nil },
		verify: func(msg, sig []byte) error { return ed25519Verify(pub, msg, sig) },
	}, err
}

// signOp times signing a message of size_bytes with the signer `newSigner` builds for the case's
// parameters; verifyOp times verifying the signature it made of that message before timing.
func signOp(newSigner func(Params) (signer, error), digest, padding string, kat func(Params) KAT) Op {
	return Op{Sized: true, DefaultSize: 32, DefaultDigest: digest, DefaultPadding: padding, KAT: kat,
		Prepare: func(p Params) (Case, error) {
			s, err := newSigner(p)
			if err != nil {
				return Case{}, err
			}
			msg := bytesOf(p.Size)
			return Case{BytesPerOp: p.Size, Cross: func() []CrossCheck { return crossSignature(s, p, nil, nil) },
				Run: func() error { _, err := s.sign(msg); return err }}, nil
		}}
}

func verifyOp(newSigner func(Params) (signer, error), digest, padding string, kat func(Params) KAT) Op {
	return Op{Sized: true, DefaultSize: 32, DefaultDigest: digest, DefaultPadding: padding, KAT: kat,
		Prepare: func(p Params) (Case, error) {
			s, err := newSigner(p)
			if err != nil {
				return Case{}, err
			}
			msg := bytesOf(p.Size)
			sig, err := s.sign(msg)
			if err != nil {
				return Case{}, err
			}
			return Case{BytesPerOp: p.Size, Cross: func() []CrossCheck { return crossSignature(s, p, msg, sig) },
				Run: func() error { return s.verify(msg, sig) }}, nil
		}}
}

// bytesOf is the timed message of `size` bytes (zeros, as the seal and digest cases').
func bytesOf(size int) []byte { return make([]byte, size) }

// crossSignature checks the case's signer against OpenSSL on a random message of the case's
// size: Go's signature verifies with OpenSSL, OpenSSL's with Go, and Go refuses OpenSSL's with a
// bit flipped. For a verify case, OpenSSL also verifies `sig` on `msg`, what the timed
// verification checks.
func crossSignature(s signer, p Params, msg, sig []byte) []CrossCheck {
	err := func() error {
		priv, err := sslPrivate(s.pkcs8)
		if err != nil {
			return err
		}
		defer priv.free()
		pub, err := sslPublic(s.spki)
		if err != nil {
			return err
		}
		defer pub.free()
		m := randomBytes(p.Size)
		ours, err := s.sign(m)
		if err != nil {
			return err
		}
		if err := pub.verify(s.md, s.pss, m, ours); err != nil {
			return fmt.Errorf("OpenSSL does not verify Go's signature: %w", err)
		}
		theirs, err := priv.sign(s.md, s.pss, m)
		if err != nil {
			return err
		}
		if err := s.verify(m, theirs); err != nil {
			return fmt.Errorf("Go does not verify OpenSSL's signature: %w", err)
		}
		if s.verify(m, flipped(theirs)) == nil {
			return fmt.Errorf("Go verifies OpenSSL's signature with a bit flipped")
		}
		if sig != nil && pub.verify(s.md, s.pss, msg, sig) != nil {
			return fmt.Errorf("OpenSSL does not verify the signature the timed verification checks")
		}
		return nil
	}()
	return []CrossCheck{crossResult(OpenSSLVersion(),
		fmt.Sprintf("a random %d-byte message signed by one verifies with the other", p.Size), err)}
}

func init() {
	family := map[string]Op{
		"ed25519-sign":   signOp(ed25519Signer, "", "", fixedKAT(katEd25519Sign)),
		"ed25519-verify": verifyOp(ed25519Signer, "", "", fixedKAT(katEd25519Verify)),
	}
	for _, bits := range []int{2048, 3072, 4096} {
		family[fmt.Sprintf("rsa%d-sign", bits)] = signOp(rsaSigner(bits), "sha256", "pkcs1", rsaKAT(bits, true))
		family[fmt.Sprintf("rsa%d-verify", bits)] = verifyOp(rsaSigner(bits), "sha256", "pkcs1", rsaKAT(bits, false))
	}
	for _, c := range []struct {
		bits   int
		digest string
	}{{256, "sha256"}, {384, "sha384"}} {
		key := fmt.Sprintf("ecdsa-p%d", c.bits)
		family[key+"-sign"] = signOp(ecdsaSigner(key), c.digest, "", ecdsaKAT(c.bits, true))
		family[key+"-verify"] = verifyOp(ecdsaSigner(key), c.digest, "", ecdsaKAT(c.bits, false))
	}
	addOps(family)
}
