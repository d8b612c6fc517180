package main

// AEADs: aes-128-gcm, aes-256-gcm and chacha20-poly1305, seal and open, of a message of
// size_bytes (default 1024), zero key, no AAD, 16-byte tag.
//
// AES-GCM is made with cipher.NewGCMWithRandomNonce in every mode, FIPS 140-3 or not: Go's FIPS
// 140-3 module approves GCM encryption only with a nonce it generates itself (SP 800-38D §8.2.2;
// under GODEBUG=fips140=only, cipher.NewGCM's caller-chosen nonces are refused), and using the
// one API in both modes makes a FIPS-on-vs-off comparison measure the module, not two different
// APIs. Its Seal draws a 96-bit nonce from the module's DRBG and prepends it (28 bytes of
// overhead: nonce and tag); Open reads it back. ChaCha20-Poly1305 (golang.org/x/crypto, not
// FIPS-approved) takes the nonce from the caller: a counter, never reused.

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"golang.org/x/crypto/chacha20poly1305"
)

// aeadAlg is one AEAD: its key length, OpenSSL's name of it, whether the Go AEAD makes its own
// nonce (Seal prepends it, Open reads it), and its Go constructor for a key.
type aeadAlg struct {
	keyBytes    int
	ssl         string
	randomNonce bool
	new         func(key []byte) (cipher.AEAD, error)
}

func gcmRandomNonce(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(block)
}

var (
	aes128GCM        = aeadAlg{16, "AES-128-GCM", true, gcmRandomNonce}
	aes256GCM        = aeadAlg{32, "AES-256-GCM", true, gcmRandomNonce}
	chacha20Poly1305 = aeadAlg{32, "ChaCha20-Poly1305", false, chacha20poly1305.New}
)

// sealFramed seals msg as nonce || ciphertext || tag: the AEAD's own nonce, or a random one.
func (a aeadAlg) sealFramed(aead cipher.AEAD, msg []byte) []byte {
	if a.randomNonce {
		return aead.Seal(nil, nil, msg, nil)
	}
	nonce := randomBytes(aead.NonceSize())
	return aead.Seal(nonce, nonce, msg, nil)
}

// openFramed opens nonce || ciphertext || tag.
func (a aeadAlg) openFramed(aead cipher.AEAD, framed []byte) ([]byte, error) {
	if a.randomNonce {
		return aead.Open(nil, nil, framed, nil)
	}
	if len(framed) < aead.NonceSize() {
		return nil, fmt.Errorf("a sealed message of %d bytes has no nonce", len(framed))
	}
	return aead.Open(nil, framed[:aead.NonceSize()], framed[aead.NonceSize():], nil)
}

// sealOp times sealing a message: a fresh nonce per seal, as a real sender must use (the
// module's own for AES-GCM; for ChaCha20-Poly1305 a counter, each thread's nonces starting with
// its own number, so none is reused).
func sealOp(a aeadAlg, kat KAT) Op {
	return Op{Sized: true, DefaultSize: 1024, KAT: fixedKAT(kat), Prepare: func(p Params) (Case, error) {
		key := make([]byte, a.keyBytes)
		aead, err := a.new(key)
		if err != nil {
			return Case{}, err
		}
		msg := make([]byte, p.Size)
		var threads atomic.Uint32
		newRun := func() func() error {
			out := make([]byte, 0, p.Size+aead.NonceSize()+aead.Overhead())
			if a.randomNonce {
				return func() error { out = aead.Seal(out[:0], nil, msg, nil); return nil }
			}
			nonce := make([]byte, aead.NonceSize())
			binary.LittleEndian.PutUint32(nonce, threads.Add(1)-1)
			var counter uint64
			return func() error {
				counter++
				binary.LittleEndian.PutUint64(nonce[4:], counter)
				out = aead.Seal(out[:0], nonce, msg, nil)
				return nil
			}
		}
		return Case{BytesPerOp: p.Size, Run: newRun(), NewRun: newRun,
			Cross: func() []CrossCheck { return crossAEAD(a, aead, key, p.Size, nil, nil) }}, nil
	}}
}

// openOp times opening what the same AEAD sealed before timing (the same message each time).
func openOp(a aeadAlg, kat KAT) Op {
	return Op{Sized: true, DefaultSize: 1024, KAT: fixedKAT(kat), Prepare: func(p Params) (Case, error) {
		key := make([]byte, a.keyBytes)
		aead, err := a.new(key)
		if err != nil {
			return Case{}, err
		}
		msg := make([]byte, p.Size)
		framed := a.sealFramed(aead, msg)
		nonce, sealed := framed[:aead.NonceSize()], framed[aead.NonceSize():]
		if a.randomNonce {
			nonce, sealed = nil, framed
		}
		newRun := func() func() error {
			out := make([]byte, 0, p.Size)
			return func() (err error) {
				out, err = aead.Open(out[:0], nonce, sealed, nil)
				return err
			}
		}
		return Case{BytesPerOp: p.Size, Run: newRun(), NewRun: newRun,
			Cross: func() []CrossCheck { return crossAEAD(a, aead, key, p.Size, framed, msg) }}, nil
	}}
}

// crossAEAD checks the case's AEAD against OpenSSL's on a random message of `size` bytes: what
// Go seals OpenSSL opens, what OpenSSL seals Go opens, and Go refuses OpenSSL's with its tag
// tampered. For an open case, OpenSSL also opens `framed` (nonce || sealed), what the timed
// open opens, to `msg`.
func crossAEAD(a aeadAlg, aead cipher.AEAD, key []byte, size int, framed, msg []byte) []CrossCheck {
	err := func() error {
		m := randomBytes(size)
		ours := a.sealFramed(aead, m)
		got, err := sslAEAD(a.ssl, false, key, ours[:12], ours[12:])
		if err != nil {
			return fmt.Errorf("OpenSSL does not open what Go sealed: %w", err)
		}
		if err := equal("plaintexts (Go sealed, OpenSSL opened)", got, m); err != nil {
			return err
		}
		nonce := randomBytes(12)
		theirs, err := sslAEAD(a.ssl, true, key, nonce, m)
		if err != nil {
			return err
		}
		theirs = append(nonce, theirs...)
		if got, err = a.openFramed(aead, theirs); err != nil {
			return fmt.Errorf("Go does not open what OpenSSL sealed: %w", err)
		}
		if err := equal("plaintexts (OpenSSL sealed, Go opened)", got, m); err != nil {
			return err
		}
		if _, err := a.openFramed(aead, flipped(theirs)); err == nil {
			return fmt.Errorf("Go opens what OpenSSL sealed with its tag tampered")
		}
		if framed != nil {
			if got, err = sslAEAD(a.ssl, false, key, framed[:12], framed[12:]); err != nil {
				return fmt.Errorf("OpenSSL does not open the message the timed open opens: %w", err)
			}
			return equal("plaintexts of the timed message", got, msg)
		}
		return nil
	}()
	return []CrossCheck{crossResult(OpenSSLVersion(),
		fmt.Sprintf("a random %d-byte message sealed by one opens with the other", size), err)}
}

func init() {
	addOps(map[string]Op{
		"aes-128-gcm-seal":       sealOp(aes128GCM, katAES128GCM),
		"aes-128-gcm-open":       openOp(aes128GCM, katAES128GCM),
		"aes-256-gcm-seal":       sealOp(aes256GCM, katAES256GCM),
		"aes-256-gcm-open":       openOp(aes256GCM, katAES256GCM),
		"chacha20-poly1305-seal": sealOp(chacha20Poly1305, katChaCha20Poly1305),
		"chacha20-poly1305-open": openOp(chacha20Poly1305, katChaCha20Poly1305),
	})
}
