//go:build !cryptoperf_wrong

package main

// The normal build: nothing is deliberately wrong (wrong_on.go is the test build that is).

// wrongBuild says whether this is the cryptoperf_wrong test build.
const wrongBuild = false

// wrongDigest leaves a digest as computed (the cryptoperf_wrong build corrupts one).
func wrongDigest(op string, msg, sum []byte) {}
