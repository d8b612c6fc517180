//go:build cryptoperf_wrong

package main

// A deliberately wrong test build (`go build -tags cryptoperf_wrong`), to show that validation
// catches what a known-answer test alone does not: its sha256 flips one bit of the digest of
// every message longer than 64 bytes. The known answer (FIPS 180-4's "abc", 3 bytes) still
// passes; the cross-check against OpenSSL, on a message of the case's size (1024 bytes by
// default), fails, so a run answers status "invalid" and nothing is timed
// (wrong_test.go proves it). Never ship this build.

// wrongBuild says whether this is the cryptoperf_wrong test build.
const wrongBuild = true

// wrongDigest flips the lowest bit of sha256's digest of a message longer than one block.
func wrongDigest(op string, msg, sum []byte) {
	if op == "sha256" && len(msg) > 64 {
		sum[0] ^= 1
	}
}
