package main

// Known answers of ML-KEM, from Project Wycheproof's seed-based vectors (vectors/ml-kem-*.txt,
// whose comments name the test cases): Go's crypto/mlkem takes a decapsulation key as its
// 64-byte seed d || z only, so the Rust worker's ACVP vectors (an expanded decapsulation key)
// cannot be imported here.

import "fmt"

func mlkemSource(s mlkemSet, what string) string {
	return fmt.Sprintf("Wycheproof testvectors_v1/%s: %s (vectors/%s)", s.tcIDs, what, s.vectors)
}

// mlkemKeygenKAT: the vector's seed gives its encapsulation key (ML-KEM.KeyGen_internal(d, z)).
func mlkemKeygenKAT(s mlkemSet) KAT {
	return KAT{Source: mlkemSource(s, "key generation from the seed"), Check: func() error {
		dk, err := s.fromSeed(vectorField(s.vectors, "seed"))
		if err != nil {
			return err
		}
		return same(s.name+" encapsulation key", dk.Encapsulator().Bytes(), vectorField(s.vectors, "ek"))
	}}
}

// mlkemEncapsKAT: derandomized encapsulation to the vector's key with its m gives its
// ciphertext and shared key; and a random encapsulation to that key (the timed call)
// decapsulates, with the seed's key, to the key it returned. The derandomized call is
// crypto/mlkem/mlkemtest's, refused as a service under GODEBUG=fips140=only: it runs with
// enforcement lifted (katOutsideEnforcement), the same module code on a published input.
func mlkemEncapsKAT(s mlkemSet) KAT {
	return KAT{Source: mlkemSource(s, "encapsulation with the vector's m, and a random encapsulation decapsulating"),
		Check: func() error {
			ek, c, k := vectorField(s.vectors, "ek"), vectorField(s.vectors, "c"), vectorField(s.vectors, "k")
			var gotK, gotC []byte
			var err error
			katOutsideEnforcement(func() { gotK, gotC, err = s.derandomized(ek, vectorField(s.vectors, "m")) })
			if err != nil {
				return err
			}
			if err := same(s.name+" ciphertext", gotC, c); err != nil {
				return err
			}
			if err := same(s.name+" shared key", gotK, k); err != nil {
				return err
			}
			pub, err := s.parseEK(ek)
			if err != nil {
				return err
			}
			dk, err := s.fromSeed(vectorField(s.vectors, "seed"))
			if err != nil {
				return err
			}
			k2, c2 := pub.Encapsulate()
			got, err := dk.Decapsulate(c2)
			if err != nil {
				return err
			}
			return same(s.name+" shared key of a random encapsulation", got, k2)
		}}
}

// mlkemDecapsKAT: the seed's key decapsulates the vector's ciphertext to its shared key, and
// the CCTV/strcmp vector's ciphertext to its implicit-rejection key.
func mlkemDecapsKAT(s mlkemSet) KAT {
	return KAT{Source: mlkemSource(s, "decapsulation, and implicit rejection"), Check: func() error {
		for _, v := range []struct{ seed, c, k string }{{"seed", "c", "k"}, {"rej_seed", "rej_c", "rej_k"}} {
			dk, err := s.fromSeed(vectorField(s.vectors, v.seed))
			if err != nil {
				return err
			}
			got, err := dk.Decapsulate(vectorField(s.vectors, v.c))
			if err != nil {
				return err
			}
			if err := same(s.name+" shared key ("+v.k+")", got, vectorField(s.vectors, v.k)); err != nil {
				return err
			}
		}
		return nil
	}}
}
