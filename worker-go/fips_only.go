//go:build cryptoperf_fips_only

// The go-fips build: `GOFIPS140=v1.0.0 go build -tags cryptoperf_fips_only` links the frozen Go
// Cryptographic Module v1.0.0 and, through the directive below, starts with Go's FIPS 140-3 mode
// enforced (GODEBUG fips140=only: what the module does not approve is refused) unless the
// process's GODEBUG says otherwise. Its hello names the build `go-fips`, which the orchestrator
// checks against the build it looked for.

//go:debug fips140=only

package main

// buildName is this build's name in hello (`build`).
const buildName = "go-fips"
