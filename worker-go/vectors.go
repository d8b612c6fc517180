package main

// The files the known answers and the fixed keys come from, built into the binary:
//
//   - vectors/*.txt: published test vectors in the Rust worker's `name = hex` format, each file's
//     comments naming the document and test case of every value (Wycheproof's ML-KEM and RSA
//     vectors; computed-abc.txt is a copy of worker/src/kat/vectors/computed-abc.txt).
//   - keys/*.der: the fixed benchmark keys of the Rust worker (worker/src/ops/keys, test keys,
//     not secrets), PKCS#8 DER, so a signature made by one worker verifies under the other.

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
)

//go:embed vectors/*.txt keys/*.der
var embedded embed.FS

// vectorField is the value of field `name` in vectors/`file` (`name = hex`, continued on the
// following lines that hold no `=`; `#` starts a comment line). It panics when the file or
// field is missing or not hex: the files are part of the build, and a test reads every field.
func vectorField(file, name string) []byte {
	text, err := embedded.ReadFile("vectors/" + file)
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	inside := false
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			if inside {
				break
			}
			continue
		}
		key, value, hasEq := strings.Cut(line, "=")
		switch {
		case hasEq && inside:
			return unhex(b.String())
		case hasEq && strings.TrimSpace(key) == name:
			inside = true
			b.WriteString(strings.TrimSpace(value))
		case !hasEq && inside:
			b.WriteString(line)
		}
	}
	if !inside {
		panic(fmt.Sprintf("vectors/%s has no field %s", file, name))
	}
	return unhex(b.String())
}

// computedABC is the Rust worker's signature of "abc" under the fixed key `key` (rsa2048,
// ecdsa-p256, ...) with `padding` ("pkcs1", "pss", or "-" for ECDSA) and `digest`, computed
// once with pyca/cryptography 48.0 over OpenSSL 3.0 (vectors/computed-abc.txt); nil when the
// table has no such row.
func computedABC(key, padding, digest string) []byte {
	text, err := embedded.ReadFile("vectors/computed-abc.txt")
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && !strings.HasPrefix(f[0], "#") && f[0] == key && f[1] == padding && f[2] == digest {
			b, err := hex.DecodeString(f[3])
			if err != nil {
				panic(err)
			}
			return b
		}
	}
	return nil
}

// computedABCSource is how a result names the computed-abc vectors.
const computedABCSource = "the signature of \"abc\" under the fixed key computed with pyca/cryptography 48.0 " +
	"(OpenSSL 3.0), the Rust worker's worker/src/kat/vectors/computed-abc.txt"

// fixedKeyDER is the PKCS#8 DER of the fixed key `name` (rsa2048, rsa3072, rsa4096, ecdsa-p256,
// ecdsa-p384, ecdh-p256-peer).
func fixedKeyDER(name string) ([]byte, error) {
	return embedded.ReadFile("keys/" + name + ".pk8.der")
}

// fixedRSAKey is the fixed RSA key of `bits` bits and its PKCS#8 DER.
func fixedRSAKey(bits int) (*rsa.PrivateKey, []byte, error) {
	return fixedKey[*rsa.PrivateKey](fmt.Sprintf("rsa%d", bits), "an RSA key")
}

// fixedECKey is the fixed EC key `name` (ecdsa-p256, ecdsa-p384, ecdh-p256-peer) and its
// PKCS#8 DER.
func fixedECKey(name string) (*ecdsa.PrivateKey, []byte, error) {
	return fixedKey[*ecdsa.PrivateKey](name, "an EC key")
}

// fixedKey is the fixed key `name` parsed from its PKCS#8 DER as a K (what: "an RSA key", for
// the error when it is another kind), and the DER.
func fixedKey[K any](name, what string) (K, []byte, error) {
	var zero K
	der, err := fixedKeyDER(name)
	if err != nil {
		return zero, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return zero, nil, err
	}
	key, ok := k.(K)
	if !ok {
		return zero, nil, fmt.Errorf("keys/%s.pk8.der is a %T, not %s", name, k, what)
	}
	return key, der, nil
}
