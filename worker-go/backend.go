package main

// The `go` backend: Go's standard library crypto, one prepared case per operation. A case is
// made from its parameters, checked against its known answer (kat.go) and only then timed.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"fmt"
	"hash"
	"runtime"

	"golang.org/x/crypto/chacha20poly1305"
)

// Case is one prepared operation: Run does it once on the prepared inputs; BytesPerOp is the
// message bytes it processes (0 for unsized operations).
type Case struct {
	Run        func() error
	BytesPerOp int
}

// Op is one operation of the backend: whether it takes a message size, its default size, how
// to prepare a case of a given size, and its known-answer test.
type Op struct {
	Sized       bool
	DefaultSize int
	Prepare     func(size int) (Case, error)
	KAT         KAT
}

// MaxSizeBytes is the largest message a request may ask for (64 MiB), as the Rust worker.
const MaxSizeBytes = 64 << 20

// Library is the backend's name in requests; LibraryName the library's, as results report it.
const (
	Library     = "go"
	LibraryName = "Go"
)

// The limits of a run, as the Rust worker's (hello's `limits`).
const (
	MaxThreads = 1024
	MaxSeconds = 3600
	MaxWarmupS = 600
	MaxBatch   = 1 << 20
)

// LibraryVersion is the Go release the worker was built with (its crypto is the standard
// library's).
func LibraryVersion() string { return runtime.Version() }

func digestOp(newHash func() hash.Hash, kat KAT) Op {
	return Op{Sized: true, DefaultSize: 1024, KAT: kat, Prepare: func(size int) (Case, error) {
		msg := make([]byte, size)
		h := newHash()
		sum := make([]byte, 0, h.Size())
		return Case{BytesPerOp: size, Run: func() error {
			h.Reset()
			h.Write(msg)
			sum = h.Sum(sum[:0])
			return nil
		}}, nil
	}}
}

func hmacOp(kat KAT) Op {
	return Op{Sized: true, DefaultSize: 1024, KAT: kat, Prepare: func(size int) (Case, error) {
		msg := make([]byte, size)
		mac := hmac.New(sha256.New, make([]byte, 32))
		sum := make([]byte, 0, mac.Size())
		return Case{BytesPerOp: size, Run: func() error {
			mac.Reset()
			mac.Write(msg)
			sum = mac.Sum(sum[:0])
			return nil
		}}, nil
	}}
}

// sealOp times sealing a message with the AEAD `newAEAD` makes (zero key): a fresh nonce per
// seal, as a real sender must use (a counter, never reused).
func sealOp(newAEAD func() (cipher.AEAD, error), kat KAT) Op {
	return Op{Sized: true, DefaultSize: 1024, KAT: kat, Prepare: func(size int) (Case, error) {
		aead, err := newAEAD()
		if err != nil {
			return Case{}, err
		}
		msg, nonce := make([]byte, size), make([]byte, aead.NonceSize())
		out := make([]byte, 0, size+aead.Overhead())
		var counter uint64
		return Case{BytesPerOp: size, Run: func() error {
			counter++
			for i := 0; i < 8; i++ {
				nonce[4+i] = byte(counter >> (8 * i))
			}
			out = aead.Seal(out[:0], nonce, msg, nil)
			return nil
		}}, nil
	}}
}

func aesGCM(keyBytes int) func() (cipher.AEAD, error) {
	return func() (cipher.AEAD, error) {
		block, err := aes.NewCipher(make([]byte, keyBytes))
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(block)
	}
}

func chacha20Poly1305() (cipher.AEAD, error) {
	return chacha20poly1305.New(make([]byte, chacha20poly1305.KeySize))
}

var ops = map[string]Op{
	"chacha20-poly1305-seal": sealOp(chacha20Poly1305, katChaCha20Poly1305),
	"sha256":                 digestOp(sha256.New, katSHA256),
	"sha384":                 digestOp(sha512.New384, katSHA384),
	"sha512":                 digestOp(sha512.New, katSHA512),
	"sha3-256":               digestOp(func() hash.Hash { return sha3.New256() }, katSHA3256),
	"hmac-sha256":            hmacOp(katHMACSHA256),
	"aes-128-gcm-seal":       sealOp(aesGCM(16), katAES128GCM),
	"aes-256-gcm-seal":       sealOp(aesGCM(32), katAES256GCM),
	"x25519-derive": {KAT: katX25519, Prepare: func(int) (Case, error) {
		priv, err := ecdh.X25519().GenerateKey(randReader())
		if err != nil {
			return Case{}, err
		}
		peer, err := ecdh.X25519().GenerateKey(randReader())
		if err != nil {
			return Case{}, err
		}
		pub := peer.PublicKey()
		return Case{Run: func() error { _, err := priv.ECDH(pub); return err }}, nil
	}},
	"ecdsa-p256-sign": {Sized: true, DefaultSize: 32, KAT: katECDSAP256, Prepare: func(size int) (Case, error) {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), randReader())
		if err != nil {
			return Case{}, err
		}
		msg := make([]byte, size)
		return Case{BytesPerOp: size, Run: func() error {
			// the message hashed with SHA-256 then signed, as the Rust worker's ECDSA operations
			digest := sha256.Sum256(msg)
			_, err := ecdsa.SignASN1(randReader(), priv, digest[:])
			return err
		}}, nil
	}},
	"ed25519-sign": {Sized: true, DefaultSize: 32, KAT: katEd25519, Prepare: func(size int) (Case, error) {
		_, priv, err := ed25519.GenerateKey(randReader())
		if err != nil {
			return Case{}, err
		}
		msg := make([]byte, size)
		return Case{BytesPerOp: size, Run: func() error { ed25519.Sign(priv, msg); return nil }}, nil
	}},
}

// prepare resolves an operation's parameters and prepares its case: the resolved parameters
// (size_bytes filled in for a sized operation), the case, or an error naming the parameter.
func prepare(name string, params map[string]any) (map[string]any, Case, error) {
	op, ok := ops[name]
	if !ok {
		return nil, Case{}, errUnsupported(fmt.Sprintf("the go backend has no operation '%s'", name))
	}
	resolved := map[string]any{}
	size := 0
	for k, v := range params {
		if k != "size_bytes" || !op.Sized {
			return nil, Case{}, errBadParams(fmt.Sprintf("unknown parameter '%s' for %s", k, name))
		}
		f, ok := v.(float64)
		if !ok || f != float64(int(f)) || f < 0 || f > MaxSizeBytes {
			return nil, Case{}, errBadParams(fmt.Sprintf("size_bytes must be an integer 0..%d, got %v", MaxSizeBytes, v))
		}
		size = int(f)
	}
	if op.Sized {
		if _, given := params["size_bytes"]; !given {
			size = op.DefaultSize
		}
		resolved["size_bytes"] = size
	}
	c, err := op.Prepare(size)
	return resolved, c, err
}
