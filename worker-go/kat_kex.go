package main

// Known answers of the key-agreement operations, through the calls the timed cases make
// (NewPrivateKey/GenerateKey, PublicKey().Bytes(), ECDH).

import (
	"bytes"
	"crypto/ecdh"
	"fmt"
)

// ecdhAnswer checks that private key `priv` gives public key `pub` and, with peer public key
// `peer`, the secret `secret` (hex; "" to skip a check).
func ecdhAnswer(curve ecdh.Curve, priv, pub, peer, secret string) error {
	k, err := curve.NewPrivateKey(unhex(priv))
	if err != nil {
		return err
	}
	if pub != "" {
		if err := same("public key", k.PublicKey().Bytes(), unhex(pub)); err != nil {
			return err
		}
	}
	if peer == "" {
		return nil
	}
	p, err := curve.NewPublicKey(unhex(peer))
	if err != nil {
		return err
	}
	got, err := k.ECDH(p)
	if err != nil {
		return err
	}
	return same("shared secret", got, unhex(secret))
}

// sharesAgree generates two key shares as the -keygen case does: their public keys must have
// the group's length, differ, and derive the same secret.
func sharesAgree(g ecdhGroup, pubLen int) error {
	a, aPub, err := generateShare(g)
	if err != nil {
		return err
	}
	b, bPub, err := generateShare(g)
	if err != nil {
		return err
	}
	if len(aPub) != pubLen || bytes.Equal(aPub, bPub) {
		return fmt.Errorf("generated public keys of %d and %d bytes (want %d), equal: %v", len(aPub), len(bPub), pubLen, bytes.Equal(aPub, bPub))
	}
	ab, err := a.ECDH(b.PublicKey())
	if err != nil {
		return err
	}
	ba, err := b.ECDH(a.PublicKey())
	if err != nil {
		return err
	}
	return same("secrets of two generated shares", ab, ba)
}

// RFC 7748 §5.2, the first X25519 test vector, and §6.1: Alice's private key with Bob's public
// key (the fixed keys the timed case derives with).
var katX25519Derive = KAT{Source: "RFC 7748 §5.2 first test vector, and §6.1 (Alice, Bob)", Check: func() error {
	if err := ecdhAnswer(ecdh.X25519(), "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4", "",
		"e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
		"c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"); err != nil {
		return err
	}
	return ecdhAnswer(ecdh.X25519(), x25519AlicePriv, x25519AlicePub, x25519BobPub,
		"4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
}}

// RFC 7748 §6.1: Alice's and Bob's public keys from their private keys; then two generated
// shares.
var katX25519Keygen = KAT{Source: "RFC 7748 §6.1 (Alice's and Bob's public keys), and two generated key shares agreeing",
	Check: func() error {
		if err := ecdhAnswer(ecdh.X25519(), x25519AlicePriv, x25519AlicePub, "", ""); err != nil {
			return err
		}
		if err := ecdhAnswer(ecdh.X25519(), x25519BobPriv, x25519BobPub, "", ""); err != nil {
			return err
		}
		return sharesAgree(x25519Group, 32)
	}}

// NIST CAVP, ECC CDH Primitive test vectors (KAS_ECC_CDH_PrimitiveTest.txt), P-256, COUNT = 0:
// d_IUT, Q_IUT (SEC1 uncompressed), Q_CAVS and the shared Z, as the Rust worker's.
const (
	cavpP256DIUT  = "7d7dc5f71eb29ddaf80d6214632eeae03d9058af1fb6d22ed80badb62bc1a534"
	cavpP256QIUT  = "04ead218590119e8876b29146ff89ca61770c4edbbf97d38ce385ed281d8a6b23028af61281fd35e2fa7002523acc85a429cb06ee6648325389f59edfce1405141"
	cavpP256QCAVS = "04700c48f77f56584c5cc632ca65640db91b6bacce3a4df6b42ce7cc838833d287db71e509e3fd9b060ddb20ba5c51dcc5948d46fbf640dfe0441782cab85fa4ac"
	cavpP256Z     = "46fc62106420ff012e54a434fbdd2d25ccc5852060561e68040dd7778997bd7b"
)

var katP256Derive = KAT{Source: "NIST CAVP ECC CDH Primitive (KAS_ECC_CDH_PrimitiveTest.txt) P-256 COUNT 0",
	Check: func() error { return ecdhAnswer(ecdh.P256(), cavpP256DIUT, cavpP256QIUT, cavpP256QCAVS, cavpP256Z) }}

// NIST CAVP, ECC CDH Primitive test vectors (KAS_ECC_CDH_PrimitiveTest.txt), P-384, COUNT = 0.
const (
	cavpP384DIUT  = "3cc3122a68f0d95027ad38c067916ba0eb8c38894d22e1b15618b6818a661774ad463b205da88cf699ab4d43c9cf98a1"
	cavpP384QIUT  = "049803807f2f6d2fd966cdd0290bd410c0190352fbec7ff6247de1302df86f25d34fe4a97bef60cff548355c015dbb3e5fba26ca69ec2f5b5d9dad20cc9da711383a9dbe34ea3fa5a2af75b46502629ad54dd8b7d73a8abb06a3a3be47d650cc99"
	cavpP384QCAVS = "04a7c76b970c3b5fe8b05d2838ae04ab47697b9eaf52e764592efda27fe7513272734466b400091adbf2d68c58e0c50066ac68f19f2e1cb879aed43a9969b91a0839c4c38a49749b661efedf243451915ed0905a32b060992b468c64766fc8437a"
	cavpP384Z     = "5f9d29dc5e31a163060356213669c8ce132e22f57c9a04f40ba7fcead493b457e5621e766c40a2e3d4d6a04b25e533f1"
)

var katP384Derive = KAT{Source: "NIST CAVP ECC CDH Primitive (KAS_ECC_CDH_PrimitiveTest.txt) P-384 COUNT 0",
	Check: func() error { return ecdhAnswer(ecdh.P384(), cavpP384DIUT, cavpP384QIUT, cavpP384QCAVS, cavpP384Z) }}

var katP384Keygen = KAT{Source: "NIST CAVP ECC CDH Primitive P-384 COUNT 0 (d_IUT gives Q_IUT), and two generated key shares agreeing",
	Check: func() error {
		if err := ecdhAnswer(ecdh.P384(), cavpP384DIUT, cavpP384QIUT, "", ""); err != nil {
			return err
		}
		return sharesAgree(p384Group, 97)
	}}

var katP256Keygen = KAT{Source: "NIST CAVP ECC CDH Primitive P-256 COUNT 0 (d_IUT gives Q_IUT), and two generated key shares agreeing",
	Check: func() error {
		if err := ecdhAnswer(ecdh.P256(), cavpP256DIUT, cavpP256QIUT, "", ""); err != nil {
			return err
		}
		return sharesAgree(p256Group, 65)
	}}
