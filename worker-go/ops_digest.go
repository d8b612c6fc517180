package main

// Hashes and HMAC: sha1, sha256, sha384, sha512, sha3-256 and hmac-sha256, each hashing (or
// MACing) a message of size_bytes (default 1024).

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"fmt"
	"hash"
)

// digestAlg is one hash: its name in the protocol, OpenSSL's name of it, and its Go constructor.
type digestAlg struct {
	name, ssl string
	new       func() hash.Hash
}

var digestAlgs = map[string]digestAlg{
	"sha1":     {"sha1", "SHA1", sha1.New},
	"sha256":   {"sha256", "SHA256", sha256.New},
	"sha384":   {"sha384", "SHA384", sha512.New384},
	"sha512":   {"sha512", "SHA512", sha512.New},
	"sha3-256": {"sha3-256", "SHA3-256", func() hash.Hash { return sha3.New256() }},
}

// digestInto hashes msg with h (reset first) into out's storage: the one call every digest
// case, its known-answer test and its cross-check make. Errors: the hash refuses (SHA-1 under
// GODEBUG=fips140=only).
func digestInto(op string, h hash.Hash, msg, out []byte) ([]byte, error) {
	h.Reset()
	if _, err := h.Write(msg); err != nil {
		return nil, err
	}
	out = h.Sum(out[:0])
	wrongDigest(op, msg, out) // a no-op but in the cryptoperf_wrong test build (wrong_on.go)
	return out, nil
}

// hashMsg is msg hashed with the digest `d` (a fresh hash each call).
func hashMsg(d digestAlg, msg []byte) ([]byte, error) {
	h := d.new()
	if _, err := h.Write(msg); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

func digestOp(d digestAlg, kat KAT) Op {
	return Op{Sized: true, DefaultSize: 1024, KAT: fixedKAT(kat), Prepare: func(p Params) (Case, error) {
		msg := make([]byte, p.Size)
		newRun := func() func() error {
			h := d.new()
			sum := make([]byte, 0, h.Size())
			return func() (err error) {
				sum, err = digestInto(d.name, h, msg, sum)
				return err
			}
		}
		return Case{BytesPerOp: p.Size, Run: newRun(), NewRun: newRun,
			Cross: func() []CrossCheck { return crossDigest(d, p.Size) }}, nil
	}}
}

// crossDigest compares Go's digest of a random message of `size` bytes with OpenSSL's.
func crossDigest(d digestAlg, size int) []CrossCheck {
	msg := randomBytes(size)
	err := func() error {
		got, err := digestInto(d.name, d.new(), msg, nil)
		if err != nil {
			return err
		}
		want, err := sslDigest(d.ssl, msg)
		if err != nil {
			return err
		}
		return equal(fmt.Sprintf("%s digests of a random %d-byte message", d.name, size), got, want)
	}()
	return []CrossCheck{crossResult(OpenSSLVersion(), fmt.Sprintf("%s of a random %d-byte message agrees", d.name, size), err)}
}

// hmacKey is the timed HMAC's key: 32 zero bytes, set up once.
var hmacKey = make([]byte, 32)

// macInto MACs msg with mac (reset first) into out's storage.
func macInto(mac hash.Hash, msg, out []byte) ([]byte, error) {
	mac.Reset()
	if _, err := mac.Write(msg); err != nil {
		return nil, err
	}
	return mac.Sum(out[:0]), nil
}

func hmacOp(kat KAT) Op {
	return Op{Sized: true, DefaultSize: 1024, KAT: fixedKAT(kat), Prepare: func(p Params) (Case, error) {
		msg := make([]byte, p.Size)
		newRun := func() func() error {
			mac := hmac.New(sha256.New, hmacKey)
			sum := make([]byte, 0, mac.Size())
			return func() (err error) {
				sum, err = macInto(mac, msg, sum)
				return err
			}
		}
		return Case{BytesPerOp: p.Size, Run: newRun(), NewRun: newRun,
			Cross: func() []CrossCheck { return crossHMAC(p.Size) }}, nil
	}}
}

// crossHMAC compares Go's HMAC-SHA-256 (the timed key) of a random message with OpenSSL's.
func crossHMAC(size int) []CrossCheck {
	msg := randomBytes(size)
	err := func() error {
		got, err := macInto(hmac.New(sha256.New, hmacKey), msg, nil)
		if err != nil {
			return err
		}
		want, err := sslHMAC("SHA256", hmacKey, msg)
		if err != nil {
			return err
		}
		return equal("HMAC-SHA-256 tags", got, want)
	}()
	return []CrossCheck{crossResult(OpenSSLVersion(), fmt.Sprintf("HMAC-SHA-256 of a random %d-byte message agrees", size), err)}
}

func init() {
	addOps(map[string]Op{
		"sha1":        digestOp(digestAlgs["sha1"], katSHA1),
		"sha256":      digestOp(digestAlgs["sha256"], katSHA256),
		"sha384":      digestOp(digestAlgs["sha384"], katSHA384),
		"sha512":      digestOp(digestAlgs["sha512"], katSHA512),
		"sha3-256":    digestOp(digestAlgs["sha3-256"], katSHA3256),
		"hmac-sha256": hmacOp(katHMACSHA256),
	})
}
