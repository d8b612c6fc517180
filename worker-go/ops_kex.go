package main

// Key agreement: x25519, ecdh-p256 and ecdh-p384, -derive (a shared secret from our fixed key
// and the peer's fixed public key, parsed and validated once before timing) and -keygen (a fresh
// key pair for one exchange and its public key encoded: 32 bytes, or a SEC1 uncompressed point).
// The fixed keys are the Rust worker's: RFC 7748 §6.1's Alice (ours) and Bob (the peer) for
// X25519; keys/ecdsa-p256 (ours) and keys/ecdh-p256-peer for P-256. P-384 (this worker's only:
// the Rust worker has no ecdh-p384): keys/ecdsa-p384 (ours) and, as the peer, the private key
// d_IUT of NIST CAVP's ECC CDH P-384 COUNT 0 (kat_kex.go), a published fixed key.

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/x509"
	"fmt"
)

// ecdhGroup is one key-agreement group: its name, its Go curve, and OpenSSL's name of its
// curve ("" for X25519).
type ecdhGroup struct {
	name     string
	curve    ecdh.Curve
	sslCurve string
}

var (
	x25519Group = ecdhGroup{"X25519", ecdh.X25519(), ""}
	p256Group   = ecdhGroup{"P-256", ecdh.P256(), "P-256"}
	p384Group   = ecdhGroup{"P-384", ecdh.P384(), "P-384"}
)

// RFC 7748 §6.1: Alice's and Bob's private keys, and their public keys.
const (
	x25519AlicePriv = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
	x25519AlicePub  = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
	x25519BobPriv   = "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"
	x25519BobPub    = "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"
)

// fixedPair is the group's fixed key pair of ours and the peer's.
func (g ecdhGroup) fixedPair() (ours, peer *ecdh.PrivateKey, err error) {
	if g.sslCurve == "" {
		if ours, err = g.curve.NewPrivateKey(unhex(x25519AlicePriv)); err != nil {
			return nil, nil, err
		}
		peer, err = g.curve.NewPrivateKey(unhex(x25519BobPriv))
		return ours, peer, err
	}
	names := []string{"ecdsa-p256", "ecdh-p256-peer"}
	if g.name == p384Group.name {
		if peer, err = g.curve.NewPrivateKey(unhex(cavpP384DIUT)); err != nil {
			return nil, nil, err
		}
		names = []string{"ecdsa-p384"} // ours; the peer is CAVP's
	}
	for i, name := range names {
		key, _, err := fixedECKey(name)
		if err != nil {
			return nil, nil, err
		}
		k, err := key.ECDH()
		if err != nil {
			return nil, nil, err
		}
		if i == 0 {
			ours = k
		} else {
			peer = k
		}
	}
	return ours, peer, nil
}

func deriveOp(g ecdhGroup, kat KAT) Op {
	return Op{KAT: fixedKAT(kat), Prepare: func(Params) (Case, error) {
		ours, peer, err := g.fixedPair()
		if err != nil {
			return Case{}, err
		}
		peerPub, err := g.curve.NewPublicKey(peer.PublicKey().Bytes())
		if err != nil {
			return Case{}, err
		}
		derive := func() ([]byte, error) { return ours.ECDH(peerPub) }
		return Case{Run: func() error { _, err := derive(); return err },
			Cross: func() []CrossCheck { return crossDerive(g, ours, peer, derive) }}, nil
	}}
}

// generateShare makes a key pair for one exchange and encodes its public key: what one
// -keygen operation times.
func generateShare(g ecdhGroup) (*ecdh.PrivateKey, []byte, error) {
	k, err := g.curve.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return k, k.PublicKey().Bytes(), nil
}

func keygenOp(g ecdhGroup, kat KAT) Op {
	return Op{KAT: fixedKAT(kat), Prepare: func(Params) (Case, error) {
		return Case{Run: func() error { _, _, err := generateShare(g); return err },
			Cross: func() []CrossCheck { return crossKeygen(g) }}, nil
	}}
}

// crossDerive checks the case's derivation against OpenSSL's on the fixed keys: OpenSSL derives
// the same secret from our private key and the peer's public key, and from the peer's private
// key and ours.
func crossDerive(g ecdhGroup, ours, peer *ecdh.PrivateKey, derive func() ([]byte, error)) []CrossCheck {
	err := func() error {
		secret, err := derive()
		if err != nil {
			return err
		}
		for _, side := range []struct{ priv, pub *ecdh.PrivateKey }{{ours, peer}, {peer, ours}} {
			got, err := sslDeriveWith(side.priv, side.pub.PublicKey())
			if err != nil {
				return err
			}
			if err := equal(g.name+" shared secrets", secret, got); err != nil {
				return err
			}
		}
		return nil
	}()
	return []CrossCheck{crossResult(OpenSSLVersion(), g.name+" secrets of the fixed keys agree, from either side", err)}
}

// sslDeriveWith is OpenSSL's secret of a Go private key (as PKCS#8) and a Go public key (as
// SubjectPublicKeyInfo).
func sslDeriveWith(priv *ecdh.PrivateKey, pub *ecdh.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	k, err := sslPrivate(der)
	if err != nil {
		return nil, err
	}
	defer k.free()
	p, err := sslPublic(spki)
	if err != nil {
		return nil, err
	}
	defer p.free()
	return k.derive(p)
}

// crossKeygen checks a key share the case generates against one OpenSSL generates: OpenSSL
// takes Go's encoded public key, Go takes OpenSSL's, and both derive the same secret.
func crossKeygen(g ecdhGroup) []CrossCheck {
	err := func() error {
		k, share, err := generateShare(g)
		if err != nil {
			return err
		}
		goPub, err := g.curve.NewPublicKey(share)
		if err != nil {
			return err
		}
		spki, err := x509.MarshalPKIXPublicKey(goPub)
		if err != nil {
			return err
		}
		p, err := sslPublic(spki)
		if err != nil {
			return fmt.Errorf("OpenSSL does not take Go's public key: %w", err)
		}
		defer p.free()
		theirs, err := sslGenerate(g.sslCurve)
		if err != nil {
			return err
		}
		defer theirs.free()
		want, err := theirs.derive(p)
		if err != nil {
			return err
		}
		raw, err := theirs.encodedPublic()
		if err != nil {
			return err
		}
		theirPub, err := g.curve.NewPublicKey(raw)
		if err != nil {
			return fmt.Errorf("Go does not take OpenSSL's public key: %w", err)
		}
		got, err := k.ECDH(theirPub)
		if err != nil {
			return err
		}
		return equal(g.name+" shared secrets", got, want)
	}()
	return []CrossCheck{crossResult(OpenSSLVersion(),
		"a generated "+g.name+" key share and OpenSSL's derive the same secret", err)}
}

func init() {
	addOps(map[string]Op{
		"x25519-derive":    deriveOp(x25519Group, katX25519Derive),
		"x25519-keygen":    keygenOp(x25519Group, katX25519Keygen),
		"ecdh-p256-derive": deriveOp(p256Group, katP256Derive),
		"ecdh-p256-keygen": keygenOp(p256Group, katP256Keygen),
		"ecdh-p384-derive": deriveOp(p384Group, katP384Derive),
		"ecdh-p384-keygen": keygenOp(p384Group, katP384Keygen),
	})
}
