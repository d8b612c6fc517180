package main

// ML-KEM (FIPS 203, crypto/mlkem): ml-kem-768 and ml-kem-1024, -keygen (generate a key pair and
// encode the encapsulation key), -encaps (encapsulate to an encapsulation key parsed before
// timing) and -decaps (decapsulate a ciphertext with a key pair generated before timing).
// OpenSSL 3.0 has no ML-KEM: the cross-check's second library is CIRCL (crosscheck_circl.go).

import (
	"crypto"
	"crypto/mlkem"
	"crypto/mlkem/mlkemtest"

	"github.com/cloudflare/circl/kem"
	"github.com/cloudflare/circl/kem/mlkem/mlkem1024"
	"github.com/cloudflare/circl/kem/mlkem/mlkem768"
)

// mlkemSet is one ML-KEM parameter set: its name, its vector file and the Wycheproof test
// cases in it, Go's calls for it, and CIRCL's implementation of it.
type mlkemSet struct {
	name, vectors, tcIDs string
	generate             func() (crypto.Decapsulator, error)
	fromSeed             func(seed []byte) (crypto.Decapsulator, error)
	parseEK              func(ek []byte) (crypto.Encapsulator, error)
	// derandomized is ML-KEM.Encaps_internal with randomness m (crypto/mlkem/mlkemtest, for
	// known-answer tests only): the shared key and the ciphertext.
	derandomized func(ek, m []byte) (k, c []byte, err error)
	circl        kem.Scheme
}

var mlkem768Set = mlkemSet{
	name: "ML-KEM-768", vectors: "ml-kem-768.txt",
	tcIDs:    "mlkem_768_test.json tcId 2 (seed, encapsulation key, decapsulation) and tcId 1 (CCTV/strcmp, implicit rejection); mlkem_768_encaps_test.json tcId 14 (encapsulation with m)",
	generate: func() (crypto.Decapsulator, error) { return decapsulator(mlkem.GenerateKey768()) },
	fromSeed: func(s []byte) (crypto.Decapsulator, error) { return decapsulator(mlkem.NewDecapsulationKey768(s)) },
	parseEK:  func(b []byte) (crypto.Encapsulator, error) { return encapsulator(mlkem.NewEncapsulationKey768(b)) },
	derandomized: func(ek, m []byte) ([]byte, []byte, error) {
		k, err := mlkem.NewEncapsulationKey768(ek)
		if err != nil {
			return nil, nil, err
		}
		return mlkemtest.Encapsulate768(k, m)
	},
	circl: mlkem768.Scheme(),
}

var mlkem1024Set = mlkemSet{
	name: "ML-KEM-1024", vectors: "ml-kem-1024.txt",
	tcIDs:    "mlkem_1024_test.json tcId 2 (seed, encapsulation key, decapsulation) and tcId 1 (CCTV/strcmp, implicit rejection); mlkem_1024_encaps_test.json tcId 18 (encapsulation with m)",
	generate: func() (crypto.Decapsulator, error) { return decapsulator(mlkem.GenerateKey1024()) },
	fromSeed: func(s []byte) (crypto.Decapsulator, error) { return decapsulator(mlkem.NewDecapsulationKey1024(s)) },
	parseEK:  func(b []byte) (crypto.Encapsulator, error) { return encapsulator(mlkem.NewEncapsulationKey1024(b)) },
	derandomized: func(ek, m []byte) ([]byte, []byte, error) {
		k, err := mlkem.NewEncapsulationKey1024(ek)
		if err != nil {
			return nil, nil, err
		}
		return mlkemtest.Encapsulate1024(k, m)
	},
	circl: mlkem1024.Scheme(),
}

// decapsulator and encapsulator turn a constructor's (key, error) into the interface, nil on
// error (never a typed nil pointer in it).
func decapsulator[K crypto.Decapsulator](k K, err error) (crypto.Decapsulator, error) {
	if err != nil {
		return nil, err
	}
	return k, nil
}

func encapsulator[K crypto.Encapsulator](k K, err error) (crypto.Encapsulator, error) {
	if err != nil {
		return nil, err
	}
	return k, nil
}

func mlkemKeygenOp(s mlkemSet) Op {
	return Op{KAT: fixedKAT(mlkemKeygenKAT(s)), Prepare: func(Params) (Case, error) {
		return Case{
			Run: func() error {
				dk, err := s.generate()
				if err == nil {
					_ = dk.Encapsulator().Bytes()
				}
				return err
			},
			Cross: func() []CrossCheck {
				dk, err := s.generate()
				return crossMLKEM(s, dk, err, nil)
			}}, nil
	}}
}

func mlkemEncapsOp(s mlkemSet) Op {
	return Op{KAT: fixedKAT(mlkemEncapsKAT(s)), Prepare: func(Params) (Case, error) {
		dk, err := s.generate()
		if err != nil {
			return Case{}, err
		}
		ek, err := s.parseEK(dk.Encapsulator().Bytes())
		if err != nil {
			return Case{}, err
		}
		return Case{Run: func() error { ek.Encapsulate(); return nil },
			Cross: func() []CrossCheck { return crossMLKEM(s, dk, nil, ek) }}, nil
	}}
}

func mlkemDecapsOp(s mlkemSet) Op {
	return Op{KAT: fixedKAT(mlkemDecapsKAT(s)), Prepare: func(Params) (Case, error) {
		dk, err := s.generate()
		if err != nil {
			return Case{}, err
		}
		_, c := dk.Encapsulator().Encapsulate()
		return Case{Run: func() error { _, err := dk.Decapsulate(c); return err },
			Cross: func() []CrossCheck {
				checks := crossMLKEM(s, dk, nil, nil)
				return append(checks, crossMLKEMCiphertext(s, dk, c))
			}}, nil
	}}
}

func init() {
	family := map[string]Op{}
	for _, s := range []mlkemSet{mlkem768Set, mlkem1024Set} {
		prefix := map[string]string{"ML-KEM-768": "ml-kem-768", "ML-KEM-1024": "ml-kem-1024"}[s.name]
		family[prefix+"-keygen"] = mlkemKeygenOp(s)
		family[prefix+"-encaps"] = mlkemEncapsOp(s)
		family[prefix+"-decaps"] = mlkemDecapsOp(s)
	}
	addOps(family)
}
