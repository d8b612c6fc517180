package main

// ML-KEM's second library: Cloudflare's CIRCL (github.com/cloudflare/circl, kem/mlkem), an
// implementation of FIPS 203 independent of Go's crypto/mlkem. OpenSSL 3.0 has no ML-KEM.

import (
	"crypto"
	"fmt"
	"runtime/debug"
)

// circlModule is CIRCL's module path; circlPinned the version go.mod requires (reported when
// the binary carries no build information).
const (
	circlModule = "github.com/cloudflare/circl"
	circlPinned = "v1.6.5"
)

// CIRCLVersion names the linked CIRCL as cross-checks report it: "CIRCL v1.6.5".
func CIRCLVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == circlModule {
				return "CIRCL " + d.Version
			}
		}
	}
	return "CIRCL " + circlPinned
}

// crossMLKEM checks Go's key pair dk (and ek, the case's parsed encapsulation key; nil: dk's)
// against CIRCL: CIRCL derives the same encapsulation key from dk's seed, decapsulates what Go
// encapsulates to ek, and Go decapsulates what CIRCL encapsulates to Go's encoded key. genErr
// is the error of generating dk, if any.
func crossMLKEM(s mlkemSet, dk crypto.Decapsulator, genErr error, ek crypto.Encapsulator) []CrossCheck {
	err := func() error {
		if genErr != nil {
			return genErr
		}
		if ek == nil {
			ek = dk.Encapsulator()
		}
		seeded, ok := dk.(interface{ Bytes() []byte })
		if !ok {
			return fmt.Errorf("a %T has no seed", dk)
		}
		pk, sk := s.circl.DeriveKeyPair(seeded.Bytes())
		want, err := pk.MarshalBinary()
		if err != nil {
			return err
		}
		if err := equal("encapsulation keys of one seed", ek.Bytes(), want); err != nil {
			return err
		}
		k, c := ek.Encapsulate()
		theirs, err := s.circl.Decapsulate(sk, c)
		if err != nil {
			return fmt.Errorf("CIRCL does not decapsulate Go's ciphertext: %w", err)
		}
		if err := equal("shared keys (Go encapsulated, CIRCL decapsulated)", k, theirs); err != nil {
			return err
		}
		pub, err := s.circl.UnmarshalBinaryPublicKey(ek.Bytes())
		if err != nil {
			return fmt.Errorf("CIRCL does not take Go's encapsulation key: %w", err)
		}
		c, k, err = s.circl.Encapsulate(pub)
		if err != nil {
			return err
		}
		ours, err := dk.Decapsulate(c)
		if err != nil {
			return fmt.Errorf("Go does not decapsulate CIRCL's ciphertext: %w", err)
		}
		return equal("shared keys (CIRCL encapsulated, Go decapsulated)", ours, k)
	}()
	return []CrossCheck{crossResult(CIRCLVersion(),
		s.name+": the same encapsulation key from one seed; what one encapsulates the other decapsulates", err)}
}

// crossMLKEMCiphertext checks the ciphertext the timed decapsulation decapsulates: CIRCL,
// with the key pair of dk's seed, gets the same shared key from it as Go.
func crossMLKEMCiphertext(s mlkemSet, dk crypto.Decapsulator, c []byte) CrossCheck {
	err := func() error {
		seeded, ok := dk.(interface{ Bytes() []byte })
		if !ok {
			return fmt.Errorf("a %T has no seed", dk)
		}
		_, sk := s.circl.DeriveKeyPair(seeded.Bytes())
		want, err := s.circl.Decapsulate(sk, c)
		if err != nil {
			return err
		}
		got, err := dk.Decapsulate(c)
		if err != nil {
			return err
		}
		return equal("shared keys of the timed ciphertext", got, want)
	}()
	return crossResult(CIRCLVersion(), s.name+": the timed ciphertext decapsulates to the same key with both", err)
}
