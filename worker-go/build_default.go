//go:build !cryptoperf_fips_only

package main

// buildName is this build's name in hello (`build`): the default Go worker, FIPS 140-3 mode as
// the process's GODEBUG sets it (off unless asked). fips_only.go is the go-fips build's.
const buildName = "go"
